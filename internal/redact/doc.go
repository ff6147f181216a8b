// Package redact removes secrets from URLs and from text that holds them,
// so that the errors forage stores, serves and logs never carry a
// provider's API key, signature or password.
//
// A request URL's query often holds credentials (apikey=…&signature=…),
// and net/http puts the whole URL into the message of every [*url.Error].
// [URL] keeps what an operator needs to debug (the scheme, the host, the
// path and the query's parameter names) and replaces the rest (the query's
// values, the userinfo, the fragment) with [Mask]. [String] does the same
// to every URL-looking substring of a text, and [Error] to an error's
// message while keeping [errors.Is] and [errors.As] working.
//
// What it cannot see: a secret in a URL's path (a token as a path
// segment), a query that an unescaped double quote or a space splits, and
// secrets outside URLs. Hosts should keep such secrets in headers.
package redact
