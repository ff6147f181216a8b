package slice

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/forage-go/forage"
)

// NextLink returns the URL of the page after resp, as its Link header
// (RFC 8288) names it with rel="next" (GitHub's, GitLab's and most REST
// APIs' way of paging), resolved against resp's request URL; "" when the
// header names none: the token of a [TokenPage]'s Next, for [TokenFeed].
//
// It reads the header as the RFC writes it, not as one provider happens to:
// several Link lines or comma-separated links, a rel unquoted, capitalised
// or naming several types ("prev next"), parameters before it, commas and
// semicolons inside a URL or a quoted title, and a relative URL. Only a
// link's first rel counts, as the RFC says. (A pattern such as
// `<([^>]+)>;\s*rel="next"` reads none of these: the feed's first page
// passes for its last, and every run is caught up with the rest unread.)
//
// The link is the provider's word, and may name another host, another
// scheme or a userinfo ("http://user:pass@elsewhere/…"): unlike a redirect,
// which [net/http.Client] follows without the Authorization header when it
// leaves the host, a fetch that asks for it with its credential would send
// the credential there. So a next link that leaves the origin of resp's
// request (its scheme, host or port differ), carries a user name or
// password, or does not parse as a URL is an error marked
// [forage.Permanent], never "" (the feed's end, with the rest unread): the
// fetch returns it as its outcome, and the run stops naming it, the
// checkpoint where it was. The error names the two origins, never the
// link's path, query or userinfo. A provider that pages across hosts on
// purpose is read from resp.Header by the host's own fetch. A relative link
// is resolved without the user name and password of the request's URL: the
// link is a cursor, stored, and a fetch that puts its credential in the URL
// puts it in each request it sends, the next page's too.
func NextLink(resp *http.Response) (string, error) {
	if resp == nil {
		return "", nil
	}
	for _, v := range resp.Header.Values("Link") {
		for v != "" {
			ref, rels, rest, ok := nextLinkValue(v)
			if !ok {
				break // malformed from here on: what follows cannot be told apart
			}
			v = rest
			for _, rel := range strings.Fields(rels) {
				if strings.EqualFold(rel, "next") {
					return resolveLink(resp, ref)
				}
			}
		}
	}
	return "", nil
}

// nextLinkValue parses the first link-value of v: "<ref>; param=value; …",
// and returns its ref, its first rel's value and what follows the comma
// after it.
func nextLinkValue(v string) (ref, rel, rest string, ok bool) {
	v = strings.TrimLeft(v, " \t,")
	if v == "" || v[0] != '<' {
		return "", "", "", false
	}
	end := strings.IndexByte(v, '>')
	if end < 0 {
		return "", "", "", false
	}
	ref, v = v[1:end], v[end+1:]
	seen := false
	for {
		v = strings.TrimLeft(v, " \t")
		if v == "" || v[0] == ',' {
			return ref, rel, v, true
		}
		if v[0] != ';' {
			return "", "", "", false
		}
		v = strings.TrimLeft(v[1:], " \t")
		i := strings.IndexAny(v, "=;,")
		if i < 0 {
			i = len(v)
		}
		name := strings.TrimSpace(v[:i])
		v = v[i:]
		value := ""
		if v != "" && v[0] == '=' {
			v = strings.TrimLeft(v[1:], " \t")
			value, v, ok = paramValue(v)
			if !ok {
				return "", "", "", false
			}
		}
		if strings.EqualFold(name, "rel") && !seen {
			rel, seen = value, true
		}
	}
}

// paramValue reads a parameter's value at the start of v, a quoted
// string (with its backslash escapes) or a token, and returns it and the
// rest of v.
func paramValue(v string) (value, rest string, ok bool) {
	if v == "" || v[0] != '"' {
		i := strings.IndexAny(v, ";,")
		if i < 0 {
			i = len(v)
		}
		return strings.TrimSpace(v[:i]), v[i:], true
	}
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		switch c := v[i]; {
		case c == '\\' && i+1 < len(v):
			i++
			b.WriteByte(v[i])
		case c == '"':
			return b.String(), v[i+1:], true
		default:
			b.WriteByte(c)
		}
	}
	return "", "", false // an unterminated quote
}

// resolveLink resolves ref against the URL resp answered, and refuses a
// link that leaves its origin or carries a userinfo (see NextLink).
func resolveLink(resp *http.Response, ref string) (string, error) {
	u, err := url.Parse(ref)
	if err != nil {
		return "", forage.Mark(errors.New("slice: the next link of the Link header does not parse as a URL"), forage.Permanent)
	}
	// A userinfo the link writes is refused; one a relative link inherits
	// from the request's own URL is the fetch's, not the provider's word.
	if u.User != nil {
		return "", forage.Mark(fmt.Errorf("slice: the next link of the Link header carries a user name or password (to %s)", origin(u)), forage.Permanent)
	}
	var base *url.URL
	if resp.Request != nil {
		base = resp.Request.URL
	}
	if base != nil {
		u = base.ResolveReference(u)
		// A relative link inherits the request's userinfo: the fetch's
		// own credential, which the link returned (a cursor, stored) must
		// not carry.
		u.User = nil
	}
	if base != nil && !sameOrigin(u, base) {
		return "", forage.Mark(fmt.Errorf("slice: the next link of the Link header leaves %s for %s (a fetch that sends a credential would send it there)", origin(base), origin(u)), forage.Permanent)
	}
	if base == nil && !u.IsAbs() {
		return ref, nil // nothing to resolve it against: as written
	}
	return u.String(), nil
}

// sameOrigin reports whether a and b name the same scheme, host and port,
// a port left off being the scheme's default (https://h and https://h:443
// are one origin).
func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) &&
		strings.EqualFold(a.Hostname(), b.Hostname()) &&
		originPort(a) == originPort(b)
}

// originPort returns u's port, or its scheme's default when u names none.
func originPort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch strings.ToLower(u.Scheme) {
	case "https", "wss":
		return "443"
	case "http", "ws":
		return "80"
	}
	return ""
}

// origin returns u's scheme and host, nothing of its path, query or
// userinfo.
func origin(u *url.URL) string {
	if u.Scheme == "" && u.Host == "" {
		return "(no host)"
	}
	return u.Scheme + "://" + u.Host
}
