package redact

import (
	"net/url"
	"strings"
)

// Mask replaces every redacted part.
const Mask = "REDACTED"

// maxKey is the longest query parameter name kept as it is: a longer one
// may itself be a secret.
const maxKey = 64

// URL returns raw with its userinfo, its query's values and its fragment
// replaced by [Mask]; the scheme, the host, the path and the query's
// parameter names stay. A query part without "=", or whose name does not
// look like one, is masked whole. Empty values stay empty. URL does not
// parse raw, so it never fails and leaves the rest byte for byte.
func URL(raw string) string {
	rest, frag, hasFrag := strings.Cut(raw, "#")
	rest, query, hasQuery := strings.Cut(rest, "?")
	var b strings.Builder
	b.Grow(len(raw))
	b.WriteString(maskUserinfo(rest))
	if hasQuery {
		b.WriteByte('?')
		b.WriteString(Query(query))
	}
	if hasFrag {
		b.WriteByte('#')
		if frag != "" {
			b.WriteString(Mask)
		}
	}
	return b.String()
}

// maskUserinfo masks the userinfo of s, a URL without query or fragment.
func maskUserinfo(s string) string {
	i := strings.Index(s, "://")
	if i < 0 {
		return s
	}
	auth := s[i+3:]
	if j := strings.IndexByte(auth, '/'); j >= 0 {
		auth = auth[:j]
	}
	at := strings.LastIndexByte(auth, '@')
	if at < 0 {
		return s
	}
	return s[:i+3] + Mask + s[i+3+at:]
}

// Query returns the raw query q (without its "?") with every value
// replaced by [Mask], keeping the parameter names.
func Query(q string) string {
	var b strings.Builder
	b.Grow(len(q))
	for i, part := range strings.Split(q, "&") {
		if i > 0 {
			b.WriteByte('&')
		}
		k, v, ok := strings.Cut(part, "=")
		switch {
		case part == "":
		case !ok || !isKey(k):
			b.WriteString(Mask)
		case v == "":
			b.WriteString(k + "=")
		default:
			b.WriteString(k + "=" + Mask)
		}
	}
	return b.String()
}

// isKey reports whether k looks like a parameter name rather than a value.
func isKey(k string) bool {
	if k == "" || len(k) > maxKey {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !isAlnum(c) && !strings.ContainsRune("_-.[]%", rune(c)) {
			return false
		}
	}
	return true
}

// String returns s with every URL-looking substring redacted by [URL]: a
// word (delimited by white space or an unescaped double quote, as
// [fmt]'s %q and net/http's [*url.Error] write them) that holds
// "scheme://", or a path with a query ("/api?key=…"). Text without such a
// word is returned as it is. String is idempotent.
func String(s string) string {
	if !strings.Contains(s, "://") && !strings.Contains(s, "?") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for len(s) > 0 {
		n := wordEnd(s)
		b.WriteString(word(s[:n]))
		m := n
		for m < len(s) && isSpace(s[m]) {
			m++
		}
		if m == n && m < len(s) { // a double quote
			m++
		}
		b.WriteString(s[n:m])
		s = s[m:]
	}
	return b.String()
}

// wordEnd returns the length of the word s starts with: up to the first
// white space or unescaped double quote.
func wordEnd(s string) int {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			i++ // an escaped byte is part of the word
		case c == '"' || isSpace(c):
			return i
		}
	}
	return len(s)
}

// word redacts one word of [String].
func word(w string) string {
	if i := strings.Index(w, "://"); i > 0 {
		j := i
		for j > 0 && isSchemeByte(w[j-1]) {
			j--
		}
		for j < i && !isAlpha(w[j]) {
			j++
		}
		if j < i {
			return w[:j] + URL(w[j:])
		}
	}
	if q := strings.IndexByte(w, '?'); q > 0 && strings.Contains(w[:q], "/") && strings.Contains(w[q:], "=") {
		return URL(w)
	}
	return w
}

// Error returns err with its message redacted by [String], or err itself
// when the message holds nothing to redact (and nil for nil). A
// [*url.Error] stays one, with its URL redacted, so errors.As and its
// Timeout method keep working; any other error is wrapped in one whose
// Unwrap returns err, so [errors.Is] and [errors.As] see the original
// chain.
func Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	red := String(msg)
	if red == msg {
		return err
	}
	if ue, ok := err.(*url.Error); ok {
		out := &url.Error{Op: ue.Op, URL: URL(ue.URL), Err: Error(ue.Err)}
		if out.Error() == red {
			return out
		}
	}
	return &redacted{err: err, msg: red}
}

// redacted is an error whose message was redacted.
type redacted struct {
	err error
	msg string
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}
func isAlpha(c byte) bool      { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isAlnum(c byte) bool      { return isAlpha(c) || '0' <= c && c <= '9' }
func isSchemeByte(c byte) bool { return isAlnum(c) || c == '+' || c == '-' || c == '.' }
