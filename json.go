package forage

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/forage-go/forage/internal/redact"
)

// MaxJSONBody is the largest body [FromHTTPJSON] reads: 64 MiB, far over
// any page a provider pages by, so that a hostile or broken provider
// cannot make a fetch hold gigabytes.
const MaxJSONBody = 64 << 20

// jsonBodyLimit is MaxJSONBody, smaller in tests.
var jsonBodyLimit int64 = MaxJSONBody

// drainBody is how much of a body FromHTTPJSON reads past what it used
// before closing it, so the connection can carry the next request.
const drainBody = 64 << 10

// errBodyTooLarge is returned by a body read past jsonBodyLimit.
var errBodyTooLarge = errors.New("body too large")

// FromHTTPJSON builds an Outcome from a response and error as [FromHTTP]
// does and, when the answer is a success, decodes its body as JSON into v.
// It always closes the body. It is the fetch of a JSON API in one call:
//
//	resp, err := client.Do(req)
//	var page struct{ Items []Item; Next string }
//	if out := forage.FromHTTPJSON(resp, err, &page); out.Class() != forage.Success {
//		return slice.Page[Item]{}, out // refused, failed, or a body that is not the page
//	}
//
// A body that does not decode into v (a truncated answer, an HTML error
// page sent with 200, the wrong shape, nothing at all) keeps the status
// and headers, and its Err says so, with the response's Content-Type,
// marked [Transient]: asked again within the retry budget, then a stop
// with a gap record, never a page skipped. Nothing of the body is quoted
// (it may hold anything). A body larger than [MaxJSONBody] is a
// [Permanent] failure that says so: the same request would bring it
// again (ask for smaller pages). An answer that is not a success is not
// read: v is left as it was.
func FromHTTPJSON(resp *http.Response, err error, v any) Outcome {
	o := FromHTTP(resp, err)
	if resp == nil || resp.Body == nil {
		return o
	}
	defer func() {
		_, _ = io.CopyN(io.Discard, resp.Body, drainBody)
		_ = resp.Body.Close()
	}()
	if o.Class() != Success {
		return o
	}
	body := &limitReader{r: resp.Body, n: jsonBodyLimit}
	derr := json.NewDecoder(body).Decode(v)
	switch {
	case errors.Is(derr, errBodyTooLarge):
		o.Err = Mark(fmt.Errorf("forage: the body of an HTTP %d answer is larger than %d bytes (MaxJSONBody): not read; ask for smaller pages", resp.StatusCode, jsonBodyLimit), Permanent)
	case errors.Is(derr, io.EOF):
		o.Err = Mark(fmt.Errorf("forage: an HTTP %d answer with no body, not the JSON expected%s", resp.StatusCode, contentType(resp)), Transient)
	case derr != nil:
		o.Err = Mark(fmt.Errorf("forage: the body of an HTTP %d answer is not the JSON expected%s: %w", resp.StatusCode, contentType(resp), redact.Error(derr)), Transient)
	}
	return o
}

// contentType returns ", Content-Type <media type>" for resp's declared
// media type (its parameters dropped), or "" when it has none.
func contentType(resp *http.Response) string {
	ct := resp.Header.Get("Content-Type")
	if ct == "" {
		return ""
	}
	if mt, _, err := mime.ParseMediaType(ct); err == nil {
		ct = mt
	}
	return fmt.Sprintf(" (Content-Type %.64q)", ct)
}

// limitReader reads from r until n bytes are read, then fails with
// errBodyTooLarge.
type limitReader struct {
	r io.Reader
	n int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errBodyTooLarge
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}
