package forage

import "net/http"

// MaxRetryAfter is the cap on the pauses ParseRetryAfter and ParseQuota
// report, for the tests of package forage_test.
const MaxRetryAfter = maxRetryAfter

// Classify is the class of an HTTP exchange computed without FromHTTP's
// header parsing and redaction (but for a 403): the reference
// TestPropertyFromHTTPAgreesWithClassify holds FromHTTP(resp, err).Class()
// to, and the direct form the classification tables test.
func Classify(resp *http.Response, err error) Class {
	if err != nil {
		return classifyError(err)
	}
	if resp == nil {
		return Permanent
	}
	if resp.StatusCode == http.StatusForbidden {
		return FromHTTP(resp, nil).Class()
	}
	return classifyStatus(resp.StatusCode)
}

// SetJSONBodyLimit sets the largest body FromHTTPJSON reads, for a test
// that cannot send 64 MiB; the returned func restores it.
func SetJSONBodyLimit(n int64) (restore func()) {
	old := jsonBodyLimit
	jsonBodyLimit = n
	return func() { jsonBodyLimit = old }
}
