// Package redact removes secrets from URLs and from text that holds them,
// so that the errors forage stores, serves and logs never carry a
// provider's API key, signature or password.
//
// A request URL's query often holds credentials (apikey=…&signature=…),
// and net/http puts the whole URL into the message of every [*url.Error].
// [URL] keeps what an operator needs to debug (the scheme, the host, the
// path, the query's parameter names, and the short, plain values of the
// parameters that page or bound it: [PlainParam]) and replaces the rest
// (the query's other values, the userinfo, the fragment) with [Mask]. [String] does the same
// to every URL-looking substring of a text, masks the values of a bare
// query string (a provider echoing "apikey=…&signature=…" back in its
// error message), and masks the value of a well-known secret key
// ([SecretKey]: apikey, token, secret, signature, password,
// authorization, …) wherever it stands ("token: …", `"api_key":"…"`,
// "Authorization: Bearer …"). [Error] does it to an error's message while
// keeping [errors.Is] and [errors.As] working. Redaction is idempotent,
// and text without secrets is left byte for byte.
//
// What it cannot see: a secret in a URL's path (a token as a path
// segment), a query that an unescaped double quote or a space splits, a
// lone key=value pair whose key names no secret ("id=…"), and a secret
// standing alone in prose. Hosts should keep secrets in headers and out of
// the messages they build.
package redact
