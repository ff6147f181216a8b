package redact

import (
	"net/url"
	"strings"
	"unicode/utf8"
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
	b.WriteString(maskPathParams(maskUserinfo(rest)))
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

// maskPathParams masks the values of the secret path parameters of s, a
// URL without query or fragment: "/p;jsessionid=…".
func maskPathParams(s string) string {
	if !strings.Contains(s, ";") {
		return s
	}
	parts := strings.Split(s, ";")
	for i := 1; i < len(parts); i++ {
		k, v, ok := strings.Cut(parts[i], "=")
		if !ok || SecretKey(k) == "" {
			continue
		}
		rest := ""
		if j := strings.IndexByte(v, '/'); j >= 0 {
			rest = v[j:]
		}
		parts[i] = k + "=" + Mask + rest
	}
	return strings.Join(parts, ";")
}

// Query returns the raw query q (without its "?") with every value
// replaced by [Mask], keeping the parameter names, and the values of the
// parameters that page or bound a query ([PlainParam]: page=3,
// limit=100, startTime=…) when they are short and plain: a stop that
// named "page=REDACTED" did not say which page failed.
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
		case PlainParam(k) && plainValue(v):
			b.WriteString(part)
		default:
			b.WriteString(k + "=" + Mask)
		}
	}
	return b.String()
}

// PlainParam reports whether a query parameter named name pages or bounds
// a query (page, per_page, limit, offset, since, startTime, symbol, …):
// its value says which request failed and is no credential. (Cursors and
// tokens are not: a provider may sign one; nor "from" and "to", which may
// be an address or a phone number.)
func PlainParam(name string) bool {
	switch strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(name)) {
	case "page", "perpage", "pagesize", "pagenumber", "limit", "offset", "count", "size", "max", "maxresults",
		"since", "until", "start", "end", "starttime", "endtime", "startdate", "enddate",
		"symbol", "symbols", "interval", "resolution", "granularity", "sort", "order", "direction":
		return true
	}
	return false
}

// plainValue reports whether v is short and plain enough to keep for a
// PlainParam: a number, a time, a symbol.
func plainValue(v string) bool {
	if len(v) > 40 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; !isAlnum(c) && strings.IndexByte("._:+-%", c) < 0 {
			return false
		}
	}
	return true
}

// isKey reports whether k looks like a parameter name rather than a value.
func isKey(k string) bool {
	if k == "" || len(k) > maxKey {
		return false
	}
	for i := 0; i < len(k); i++ {
		if !isKeyByte(k[i]) {
			return false
		}
	}
	return true
}

// String returns s with its secrets replaced by [Mask]:
//
//   - every URL-looking word (delimited by white space or an unescaped
//     double quote, as [fmt]'s %q and net/http's [*url.Error] write them)
//     that holds "scheme://", or a path with a query ("/api?key=…"), is
//     redacted by [URL];
//   - a bare query string, key=value pairs joined by "&"
//     ("apikey=…&signature=…", as a provider echoes its request), has
//     every value masked by [Query];
//   - the value of a well-known secret key (see [SecretKey]) is masked
//     wherever it stands: "token=…", "password:…", "secret: …", the
//     JSON "api_key":"…", and "Authorization: Bearer …" (the scheme
//     word stays);
//   - a PEM block ("-----BEGIN … PRIVATE KEY-----" to its END line) is
//     masked whole, and so is the text of an XML element named for a
//     secret ("<apiKey>…</apiKey>").
//
// Text with none of these, and any text without '=', ':', '?', '%', '<'
// and "-----BEGIN", is returned as it is. String is idempotent.
func String(s string) string {
	// Masking can make a word look different to the rules (an XML tag's
	// attribute masked, a URL cut): the result is masked again until it
	// stays the same, so String of its own result changes nothing.
	for range 3 {
		t := mask(s)
		if t == s {
			break
		}
		s = t
	}
	return s
}

// mask is one pass of [String].
func mask(s string) string {
	s = maskXML(maskPEM(s))
	if !strings.ContainsAny(s, "?=:%") && !strings.Contains(s, "Bearer") && !strings.Contains(s, "BEARER") {
		return s // no key, no query, no bearer scheme: nothing a word rule masks
	}
	var b strings.Builder
	b.Grow(len(s))
	var st state
	for len(s) > 0 {
		n := wordEnd(s)
		var w string
		w, st = word(s[:n], st)
		b.WriteString(w)
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

// maskPEM replaces every PEM block of s ("-----BEGIN … KEY-----" to its
// "-----END …-----", or to the end of s when cut) by [Mask]: a private key
// spans many words, and masking the one after its name would leave the
// rest.
func maskPEM(s string) string {
	const begin, end, dashes = "-----BEGIN", "-----END", "-----"
	for {
		i := strings.Index(s, begin)
		if i < 0 {
			return s
		}
		stop := len(s)
		if j := strings.Index(s[i:], end); j >= 0 {
			stop = i + j + len(end)
			if k := strings.Index(s[stop:], dashes); k >= 0 {
				stop += k + len(dashes)
			} else {
				stop = len(s)
			}
		}
		s = s[:i] + Mask + s[stop:]
	}
}

// maskXML masks the text of every XML element of s named for a secret (see
// [SecretKey]): "<apiKey>…</apiKey>", "<ns:Password>…</ns:Password>", as
// an XML body or a SOAP fault quotes a request's credentials. The text runs
// to the element's end tag (nested elements of the same name included); an
// element without one is masked to the next '<'. An element with no text,
// or text already [Mask], is left as it is. It takes time linear in s.
func maskXML(s string) string {
	if !strings.Contains(s, "<") {
		return s
	}
	var (
		b     strings.Builder
		noEnd map[string]bool // names with no end tag in the rest of s
	)
	for {
		i := strings.IndexByte(s, '<')
		if i < 0 {
			break
		}
		j := i + 1
		for j < len(s) && (isKeyByte(s[j]) || s[j] == ':') {
			j++
		}
		name := s[i+1 : j]
		open := -1 // the end of the start tag
		if name != "" && j < len(s) && (s[j] == '>' || isSpace(s[j]) || s[j] == '/') &&
			SecretKey(name[strings.LastIndexByte(name, ':')+1:]) != "" {
			open = tagEnd(s, j)
		}
		if open < 0 || s[open-2] == '/' {
			b.WriteString(s[:j]) // not a secret's start tag, or an empty element
			s = s[j:]
			continue
		}
		b.WriteString(s[:open])
		s = s[open:]
		stop := -1
		if !noEnd[name] {
			if stop = endTag(s, name); stop < 0 {
				if noEnd == nil {
					noEnd = map[string]bool{}
				}
				noEnd[name] = true
			}
		}
		if stop < 0 {
			stop = strings.IndexByte(s, '<')
			if stop < 0 {
				stop = len(s)
			}
			if strings.TrimSpace(s[:stop]) == "" {
				continue // nothing after the tag but space: no value
			}
		}
		if stop > 0 && s[:stop] != Mask {
			b.WriteString(Mask)
			s = s[stop:]
		}
	}
	b.WriteString(s)
	return b.String()
}

// tagEnd returns the index just after the '>' that ends the tag whose name
// ends at j in s (a '>' in a quoted attribute value does not), or -1 when
// the tag does not end before the next '<' (which no tag holds).
func tagEnd(s string, j int) int {
	var quote byte
	for k := j; k < len(s); k++ {
		switch c := s[k]; {
		case c == '<':
			return -1
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '>':
			return k + 1
		}
	}
	return -1
}

// endTag returns the index in s of the end tag ("</name>" or "</name >")
// that closes an element of name whose text s begins, counting the start
// and end tags of name within it, or -1 when there is none.
func endTag(s, name string) int {
	depth := 1
	for k := 0; ; k++ {
		i := strings.IndexByte(s[k:], '<')
		if i < 0 {
			return -1
		}
		k += i
		rest := s[k+1:]
		closing := strings.HasPrefix(rest, "/")
		if closing {
			rest = rest[1:]
		}
		if !strings.HasPrefix(rest, name) || len(rest) == len(name) {
			continue
		}
		switch c := rest[len(name)]; {
		case closing && (c == '>' || isSpace(c)):
			if depth--; depth == 0 {
				return k
			}
		case !closing && (c == '>' || isSpace(c)):
			if e := tagEnd(s, k+1+len(name)); e > 0 && s[e-2] != '/' {
				depth++
			}
		}
	}
}

// state is what the words before tell [String] about the next one.
type state uint8

const (
	plain      state = iota // nothing pending
	keyed                   // a secret key name: a ":" or "=" word may follow
	authKeyed               // the same for Authorization
	secret                  // the next word is a secret value
	authValue               // the next word is a credential, or an auth scheme and then one
	authParams              // after an auth scheme this package does not know: its credential, or its parameters
)

// word redacts one word w of [String], which the words before left in
// state st, and returns the state it leaves for the next word. A word
// that is empty, or only ":" or "=", passes a pending secret on.
func word(w string, st state) (string, state) {
	if st != plain && (w == "" || w == ":" || w == "=") {
		if st == keyed || st == authKeyed {
			if w == "" {
				return w, st
			}
			return w, st + 2 // keyed → secret, authKeyed → authValue
		}
		return w, st
	}
	switch st {
	case authValue:
		if isAuthScheme(strings.TrimLeft(w, "'`([{")) { // 'Bearer in a Python-style dict
			return w, secret
		}
		// A credential, or a scheme this package does not know
		// ("Klaviyo-API-Key pk_…", "SSWS …", "OAuth oauth_consumer_key=…"):
		// the word after it is masked too, unless this one ends the value.
		if st := goesOn(w, secret); st == secret {
			return Mask, authParams
		}
		return Mask, goesOn(w, secret)
	case authParams:
		if len(w) > 1 && w[len(w)-1] == '=' && strings.IndexByte(w, '=') == len(w)-1 && SecretKey(w[:len(w)-1]) != "" {
			// `OAuth oauth_consumer_key="…", oauth_signature="…"`: an
			// auth scheme's parameters, each value the next word.
			return w, secret
		}
		return Mask, goesOn(w, secret)
	case secret:
		// "session=…; csrftoken=…; sid=…": a Cookie header's pairs, or
		// an auth header's parameters, go on after a ";".
		return Mask, goesOn(w, plain)
	case keyed, authKeyed:
		if w[0] == ':' || w[0] == '=' {
			if opener(w[1:]) {
				return w, st + 2 // ":[]string{", ":[": the value is the next word
			}
			return w[:1] + Mask, plain
		}
	}
	if r, ok := urlWord(w); ok {
		return r, plain
	}
	if b := strings.TrimLeft(w, "'`([{"); b == "Bearer" || b == "BEARER" {
		// "Bearer S3CRET is expired": whatever stands before it, the word
		// after the scheme as headers spell it is a credential (prose's
		// "a bearer token is required" keeps its word).
		return w, secret
	} else if (strings.HasPrefix(b, "Bearer") || strings.HasPrefix(b, "BEARER")) && len(b) > len("Bearer") && strings.ContainsRune(":,=", rune(b[len("Bearer")])) {
		// "Bearer:S3CRET", "Bearer,S3CRET": the rest of the word.
		i := len(w) - len(b) + len("Bearer") + 1
		return w[:i] + Mask, plain
	}
	if k := SecretKey(w); k != "" {
		if k == "authorization" {
			return w, authKeyed
		}
		return w, keyed
	}
	st = plain
	i, auth := secretSep(w)
	if i >= 0 && i == len(w)-1 { // "token:" or "…&token=": the value is the next word
		st = secret
		if auth {
			st = authValue
		}
	}
	q := queryStart(w)
	switch {
	case q >= 0 && (i < 0 || i >= q): // a query string, secret keys in it or none
		return w[:q] + Query(w[q:]), st
	case i >= 0 && i+1 < len(w): // a secret key and its value ("token:…", "k=…")
		if auth && isAuthScheme(strings.TrimLeft(w[i+1:], "[{('")) {
			// "Authorization:Bearer", "Authorization:[Bearer" (a Go map):
			// the scheme stays, the credential is the next word.
			return w, secret
		}
		if auth {
			return w[:i+1] + Mask, goesOn(w, secret) // "Authorization:[Key": a scheme this package does not know
		}
		return w[:i+1] + Mask, goesOn(w, plain)
	}
	return w, st
}

// goesOn returns the state after a masked word w of a header's value: for
// a word that may be followed by more of the value (an Authorization
// scheme's credential, a Cookie's next pair after a ";"), secret; else
// the state next. An Authorization value (next secret) goes on unless w
// ends it (a quote, a bracket, a comma); any value goes on after a ";".
func goesOn(w string, next state) state {
	if strings.HasSuffix(w, ";") {
		return secret
	}
	if next == secret && (w == "" || strings.ContainsRune("\"'`)]},", rune(w[len(w)-1]))) {
		return plain
	}
	return next
}

// urlWord redacts w by [URL] if it looks like a URL or a path with a
// query, reporting whether it did. What stands before the URL must hold
// no secret key's value and no query string (else the other rules mask
// it, URL included).
func urlWord(w string) (string, bool) {
	if i := strings.Index(w, "://"); i > 0 {
		j := i
		for j > 0 && isSchemeByte(w[j-1]) {
			j--
		}
		for j < i && !isAlpha(w[j]) {
			j++
		}
		if q := queryStart(w); j < i && clean(w[:j]) && (q < 0 || q >= j) {
			return w[:j] + URL(w[j:]), true
		}
	}
	if q := strings.IndexByte(w, '?'); q > 0 && strings.Contains(w[:q], "/") && strings.Contains(w[q:], "=") &&
		queryStart(w) < 0 && clean(w[:q]) { // else the query string rule masks the same, and more
		return URL(w), true
	}
	return w, false
}

// clean reports whether w holds neither a secret key's value nor a query
// string.
func clean(w string) bool {
	i, _ := secretSep(w)
	return i < 0 && queryStart(w) < 0
}

// secretSep returns the index of the first '=' or ':' in w that follows a
// secret key name (see [SecretKey]), and whether that key is
// Authorization; -1 if there is none.
func secretSep(w string) (int, bool) {
	for i := 0; i < len(w); i++ {
		end := i // the separator's last byte
		if w[i] == '%' && i+2 < len(w) && (w[i+1:i+3] == "3D" || w[i+1:i+3] == "3d" || w[i+1:i+3] == "3A" || w[i+1:i+3] == "3a") {
			end = i + 2 // "token%3D…", "api_key%3A…": percent-encoded
		} else if w[i] != '=' && w[i] != ':' {
			continue
		}
		j := i
		if j > 0 && w[j-1] == '\'' {
			j-- // a single-quoted name: 'password': (Python's dict)
		}
		if k := SecretKey(w[keyStart(w, j):j]); k != "" {
			return end, strings.HasSuffix(k, "authorization") // "map[Authorization:" too
		}
	}
	return -1, false
}

// keyStart returns where the parameter name that ends at w[i] starts.
func keyStart(w string, i int) int {
	for i > 0 && isKeyByte(w[i-1]) {
		i--
	}
	return i
}

// queryStart returns where a bare query string in w starts (the name
// before its first '='), if w holds one from there on: at least two pairs
// joined by '&' ("a=1&b=2"); -1 otherwise.
func queryStart(w string) int {
	e := strings.IndexByte(w, '=')
	if e < 0 {
		return -1
	}
	ks := keyStart(w, e)
	if ks == e || !strings.Contains(w[e:], "&") {
		return -1
	}
	return ks
}

// secretSuffixes and secretNames are the parameter and header names whose
// values [String] masks anywhere, compared in lower case without '-', '_'
// and '.': a name ending with a suffix ("x-mbx-apikey", "access_token",
// "client_secret"), or equal to a name.
var (
	secretSuffixes = []string{"apikey", "token", "secret", "signature", "password", "passwd", "passphrase", "authorization", "accesskey", "secretkey", "privatekey", "sign", "cookie", "credential", "sessionid", "sessid",
		// keys by another name: Azure's Ocp-Apim-Subscription-Key and
		// X-Functions-Key, Cloudflare's X-Auth-Key, Datadog's
		// DD-APPLICATION-KEY, Alpaca's APCA-API-KEY-ID, AWS's AccessKeyId,
		// OAuth 1's oauth_consumer_key, license, app and listen keys
		"subscriptionkey", "functionskey", "authkey", "applicationkey", "appkey", "consumerkey", "licensekey", "listenkey", "accesskeyid", "apikeyid"}
	secretNames = []string{"key", "sig", "auth", "pwd", "pass"}
)

// SecretKey returns name normalized (lower case, without '-', '_', '.',
// '[' and ']') if it names a value [String] masks wherever it stands:
// one ending with apikey, token, secret, signature, password, passwd,
// passphrase, sign, cookie, credential, sessionid, sessid, authorization, accesskey,
// secretkey, privatekey, subscriptionkey, functionskey, authkey,
// applicationkey, appkey, consumerkey, licensekey, listenkey, accesskeyid
// or apikeyid ("api_key", "X-MBX-APIKEY", "access_token",
// "client_secret", "OK-ACCESS-SIGN", "Ocp-Apim-Subscription-Key"), or one of key, sig,
// auth, pwd and pass; otherwise "". A name longer than 64 bytes, or with
// a byte a parameter name does not hold, is none.
func SecretKey(name string) string {
	if name == "" || len(name) > maxKey {
		return ""
	}
	var b [maxKey]byte
	n := 0
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case !isKeyByte(c):
			return ""
		case c == '%' && i+2 < len(name) && isHex(name[i+1]) && isHex(name[i+2]):
			// A percent-encoded name ("api%5Fkey"): its byte decoded.
			c = unhex(name[i+1])<<4 | unhex(name[i+2])
			i += 2
			if strings.IndexByte("-_.[]", c) >= 0 {
				continue
			}
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
		case strings.IndexByte("-_.[]%", c) >= 0:
			continue
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		b[n] = c
		n++
	}
	k := string(b[:n])
	for _, suf := range secretSuffixes {
		if strings.HasSuffix(k, suf) {
			return k
		}
	}
	for _, name := range secretNames {
		if k == name {
			return k
		}
	}
	return ""
}

// isAuthScheme reports whether w is an HTTP authentication scheme that
// precedes a credential ("Bearer", "Basic", …).
func isAuthScheme(w string) bool {
	for _, s := range []string{"bearer", "basic", "digest", "token", "apikey", "negotiate", "hmac"} {
		if strings.EqualFold(w, s) {
			return true
		}
	}
	return false
}

// opener reports whether w, what follows a secret key's ':' or '=' in its
// word, only opens the value's brackets ("[", "{", "[]string{", as fmt
// prints maps and http.Header): the value is the next word.
func opener(w string) bool {
	w = strings.TrimPrefix(w, "[]string")
	return w != "" && strings.Trim(w, "[{(") == ""
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

// isKeyByte reports whether c may be part of a query parameter name.
func isKeyByte(c byte) bool { return isAlnum(c) || strings.IndexByte("_-.[]%", c) >= 0 }

// Clip cuts s to at most n bytes on a rune boundary, marking the cut with
// " …": for messages that are stored and served, not logs.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = " …"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// isHex reports whether c is a hexadecimal digit.
func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// unhex returns the value of the hexadecimal digit c.
func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}
