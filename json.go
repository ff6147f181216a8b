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
// any page a provider pages by. It bounds what a hostile or broken
// provider can send, not what decoding it takes: the body is held twice
// while it decodes (its bytes, and the decoder's buffer), and the value it
// decodes into may be many times larger than its JSON, by the target
// type: 63 MiB of empty arrays decoded into a [][]string peaked at 1.6 GB
// of heap, as into any or []map[string]any. Decode into a type that holds
// what a page holds (a struct of the fields used, slices of such structs),
// and bound the fetches in flight (a provider's MaxInFlight).
const MaxJSONBody = 64 << 20

// jsonBodyLimit is MaxJSONBody, smaller in tests.
var jsonBodyLimit int64 = MaxJSONBody

// errBodyTooLarge is returned by a body read past jsonBodyLimit.
var errBodyTooLarge = errors.New("body too large")

// Validator is a page type that tells whether an answer decoded into it
// is the page: [FromHTTPJSON] calls Validate after decoding, and an error
// makes the outcome a [Transient] failure that names it. JSON decodes {},
// an error object ({"ok": false, "error": "ratelimited"}) or a page of
// another version into any struct without an error, leaving its fields
// zero: a feed whose page says "no more" by a missing field read such an
// answer as caught up, with a hole. Validate checks what makes the answer
// the page, at least the field that says whether more follows:
//
//	type page struct {
//		Events  []Event `json:"events"`
//		HasMore *bool   `json:"has_more"`
//	}
//
//	func (p *page) Validate() error {
//		if p.HasMore == nil {
//			return errors.New("no has_more")
//		}
//		return nil
//	}
type Validator interface {
	Validate() error
}

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
// A body that is not the page keeps the status and headers, and its Err
// says so, with the response's Content-Type, marked [Transient]: asked
// again within the retry budget, then a stop with a gap record, never a
// page skipped. Not the page: a body that does not decode into v (a
// truncated answer, an HTML error page sent with 200, a value of another
// type), nothing at all, JSON null, one that v's Validate refuses when v
// is a [Validator] (the way to refuse {} and error objects, which decode
// into any struct), more than one JSON value, and the body of a 202
// Accepted (the provider took the request and has not answered it yet: a
// report still being computed). Decode into a fresh value for each
// answer: what an earlier page set stays where this one sets nothing, and
// Validate would see it. A v that is not a non-nil pointer is the
// caller's mistake, a [Permanent] failure that says so. A 204 No Content
// is nothing at all too: for a provider that answers 204 when nothing is
// new, read resp.StatusCode first and make that an empty page yourself
// (its feed then says whether the stream is caught up).
// Nothing of the body is quoted (it may hold anything). A body larger
// than [MaxJSONBody] is a [Permanent] failure that says so: the same
// request would bring it again (ask for smaller pages). An answer that is
// not a success is not read: v is left as it was.
func FromHTTPJSON(resp *http.Response, err error, v any) Outcome {
	o := FromHTTP(resp, err)
	if resp == nil {
		return o
	}
	if resp.Body == nil {
		// A response built by hand (a fake RoundTripper, a cache): no body,
		// as an empty one is (a Success with v untouched read as a page
		// of nothing).
		if o.Class() == Success {
			o.Err = Mark(fmt.Errorf("forage: an HTTP %d answer with no body, not the JSON expected%s", resp.StatusCode, contentType(resp)), Transient)
		}
		return o
	}
	// Closed, not drained: draining a body for the connection's reuse
	// waits on the provider, and a 503 that sent a byte and then stalled
	// held the fetch until the caller's deadline, or for good. (A success
	// is read to its end below.)
	defer func() { _ = resp.Body.Close() }()
	if o.Class() != Success {
		return o
	}
	if resp.StatusCode == http.StatusAccepted {
		o.Err = Mark(errors.New("forage: HTTP 202 Accepted: the provider took the request and has not answered it yet; asked again"), Transient)
		return o
	}
	var raw json.RawMessage
	dec := json.NewDecoder(&limitReader{r: resp.Body, n: jsonBodyLimit})
	derr := dec.Decode(&raw)
	switch {
	case derr != nil:
	case string(raw) == "null":
		derr = errors.New("JSON null")
	default:
		if _, terr := dec.Token(); terr != io.EOF { // nothing but spaces may follow, as json.Unmarshal says
			var syn *json.SyntaxError
			switch {
			case errors.Is(terr, errBodyTooLarge):
				derr = terr
			case terr != nil && !errors.As(terr, &syn):
				// The body failed after its JSON value (cut short of its
				// length, a reset): a read error, not a second value.
				derr = fmt.Errorf("the body was cut short after its JSON value: %w", terr)
			default:
				derr = errors.New("more after the JSON value (two values, or a value and then other text)")
			}
		} else {
			derr = json.Unmarshal(raw, v)
		}
	}
	if inv := (*json.InvalidUnmarshalError)(nil); errors.As(derr, &inv) {
		// The caller's mistake, not the provider's answer: asked again,
		// it would fail the same way at every run.
		o.Err = Mark(fmt.Errorf("forage: FromHTTPJSON needs a non-nil pointer to decode into (got %s)", inv.Type), Permanent)
		return o
	}
	if derr == nil {
		if val, ok := v.(Validator); ok {
			if verr := val.Validate(); verr != nil {
				derr = fmt.Errorf("not the page (Validate): %w", verr)
			}
		}
	}
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
