package forage_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/forage-go/forage"
	"pgregory.net/rapid"
)

// closer is a body that records whether it was closed and how much of it
// was read.
type closer struct {
	*strings.Reader
	closed bool
}

func (c *closer) Close() error { c.closed = true; return nil }

func response(status int, contentType, body string, header ...string) (*http.Response, *closer) {
	b := &closer{Reader: strings.NewReader(body)}
	h := http.Header{}
	if contentType != "" {
		h.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(header); i += 2 {
		h.Set(header[i], header[i+1])
	}
	return &http.Response{StatusCode: status, Header: h, Body: b}, b
}

type page struct {
	Items []int `json:"items"`
	Next  string
}

// FromHTTPJSON decodes the body of a success, classifies every other
// answer as FromHTTP does without reading it, and turns a body that is not
// the page into a classified failure that names what came (its
// Content-Type) and quotes nothing of it: asked again, never a page
// skipped. It always closes the body.
func TestFromHTTPJSON(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name        string
		status      int
		ctype, body string
		header      []string
		class       forage.Class
		err         []string // what Err must say
		want        page
	}{
		{name: "a page", status: 200, ctype: "application/json", body: `{"items":[1,2],"Next":"t2"}`, class: forage.Success, want: page{Items: []int{1, 2}, Next: "t2"}},
		{name: "an HTML error page sent with 200", status: 200, ctype: "text/html; charset=utf-8", body: "<html>upstream down, token=s3cr3t</html>", class: forage.Transient, err: []string{"HTTP 200", "not the JSON expected", `"text/html"`}},
		{name: "a truncated page", status: 200, body: `{"items":[1,2`, class: forage.Transient, err: []string{"not the JSON expected", "unexpected EOF"}},
		{name: "the wrong shape", status: 200, body: `{"items":"s3cr3t"}`, class: forage.Transient, err: []string{"not the JSON expected", "cannot unmarshal"}},
		{name: "no body", status: 200, ctype: "application/json", class: forage.Transient, err: []string{"with no body"}},
		{name: "refused", status: 429, body: `{"error":"slow down"}`, header: []string{"Retry-After", "2"}, class: forage.Throttled},
		{name: "an outage", status: 503, body: "<html>s3cr3t</html>", class: forage.Overloaded},
		{name: "two values", status: 200, ctype: "application/json", body: `{"items":[1]} <html>s3cr3t</html>`, class: forage.Transient, err: []string{"more after the JSON value"}},
		{name: "JSON null", status: 200, ctype: "application/json", body: "null", class: forage.Transient, err: []string{"not the JSON expected", "JSON null"}},
		{name: "202 Accepted", status: 202, ctype: "application/json", body: `{"items":[]}`, class: forage.Transient, err: []string{"202 Accepted", "not answered it yet"}},
		{name: "a body over the limit", status: 200, body: `{"items":[` + strings.Repeat("1,", 600) + `1]}`, class: forage.Permanent, err: []string{"larger than 1024 bytes", "smaller pages"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer forage.SetJSONBodyLimit(1024)()
			resp, body := response(c.status, c.ctype, c.body, c.header...)
			var got page
			out := forage.FromHTTPJSON(resp, nil, &got)
			if out.Class() != c.class || out.Status != c.status {
				t.Fatalf("class %v, status %d (err %v); want %v, %d", out.Class(), out.Status, out.Err, c.class, c.status)
			}
			if !body.closed {
				t.Fatal("the body was not closed")
			}
			for _, w := range c.err {
				if out.Err == nil || !strings.Contains(out.Err.Error(), w) {
					t.Fatalf("Err = %v, want it to say %s", out.Err, w)
				}
			}
			if out.Err != nil && strings.Contains(out.Err.Error(), "s3cr3t") {
				t.Fatalf("Err quotes the body: %v", out.Err)
			}
			if c.class == forage.Success && out.Err != nil || !slices.Equal(got.Items, c.want.Items) || got.Next != c.want.Next {
				t.Fatalf("decoded %+v (err %v), want %+v", got, out.Err, c.want)
			}
			if c.name == "refused" && out.RetryAfter == 0 {
				t.Fatal("the Retry-After of a refusal was not read")
			}
		})
	}
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	if out, want := forage.FromHTTPJSON(nil, dial, new(page)), forage.FromHTTP(nil, dial); out.Class() != want.Class() || out.Err.Error() != want.Err.Error() {
		t.Fatalf("no response: %v %v, want %v %v as FromHTTP", out.Class(), out.Err, want.Class(), want.Err)
	}
}

// Whatever a provider sends with a 200, FromHTTPJSON is a success exactly
// when json.Unmarshal decodes the body into the target and the body is
// not null, and
// otherwise a Transient failure, never a panic; the body is closed either
// way.
func TestPropertyFromHTTPJSONAgreesWithEncodingJSON(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		var body string
		if rapid.Bool().Draw(t, "well-formed") {
			items := rapid.SliceOfN(rapid.Int(), 0, 5).Draw(t, "items")
			b, _ := json.Marshal(map[string]any{"items": items, "Next": rapid.String().Draw(t, "next")})
			cut := rapid.IntRange(0, len(b)).Draw(t, "cut") // a truncated answer, or all of it
			body = string(b[:cut])
		} else {
			body = rapid.StringOf(rapid.SampledFrom([]rune(`{}[]",:01nulltrue<html> \x00é`))).Draw(t, "garbage")
		}
		resp, rc := response(200, "", body)
		var got page
		out := forage.FromHTTPJSON(resp, nil, &got)
		var ref page
		refErr := json.Unmarshal([]byte(body), &ref) // one value, nothing after it but spaces
		var first any
		if json.NewDecoder(bytes.NewReader([]byte(body))).Decode(&first) == nil && first == nil {
			refErr = errors.New("null: not a page") // decodes, into nothing
		}
		if (refErr == nil) != (out.Class() == forage.Success) {
			t.Fatalf("body %q: class %v (err %v), encoding/json says %v", body, out.Class(), out.Err, refErr)
		}
		if refErr != nil && out.Class() != forage.Transient {
			t.Fatalf("body %q: class %v, want Transient", body, out.Class())
		}
		if !rc.closed {
			t.Fatal("the body was not closed")
		}
		_, _ = io.Copy(io.Discard, rc)
	})
}

// checkedPage is a page that says whether more follows, and refuses an
// answer that does not.
type checkedPage struct {
	Items   []int `json:"items"`
	HasMore *bool `json:"has_more"`
}

func (p *checkedPage) Validate() error {
	if p.HasMore == nil {
		return errors.New("no has_more")
	}
	return nil
}

// TestFromHTTPJSONAsksThePageIfItIsOne: a 200 whose body decodes into the
// page but is not one ({}, an error object, a page of another shape) is a
// Transient failure naming what Validate said, when the page is a
// Validator: asked again, never a page read as "no more" (a feed ended
// caught up, 6 records of 30, on one such answer).
func TestFromHTTPJSONAsksThePageIfItIsOne(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]forage.Class{
		`{}`:                                 forage.Transient,
		`{"ok":false,"error":"ratelimited"}`: forage.Transient,
		`{"items":null,"has_more":null}`:     forage.Transient,
		`{"items":[1],"has_more":false}`:     forage.Success,
		`{"items":[],"has_more":true}`:       forage.Success,
	} {
		resp, _ := response(200, "application/json", body)
		var p checkedPage
		out := forage.FromHTTPJSON(resp, nil, &p)
		if out.Class() != want {
			t.Errorf("%s: class %v (err %v), want %v", body, out.Class(), out.Err, want)
		}
		if want != forage.Success && (out.Err == nil || !strings.Contains(out.Err.Error(), "no has_more")) {
			t.Errorf("%s: err %v, want it to name what Validate said", body, out.Err)
		}
	}
}

// TestFromHTTPJSONBlamesTheCallerForABadTarget: a target that is not a
// non-nil pointer is the caller's mistake, Permanent, said as such: it was
// Transient, blamed on the provider's body, and asked again at every run.
func TestFromHTTPJSONBlamesTheCallerForABadTarget(t *testing.T) {
	t.Parallel()
	var nilPage *page
	for name, v := range map[string]any{"a value": page{}, "a nil pointer": nilPage, "nil": nil} {
		resp, _ := response(200, "application/json", `{"items":[1]}`)
		out := forage.FromHTTPJSON(resp, nil, v)
		if out.Class() != forage.Permanent || !strings.Contains(out.Err.Error(), "needs a non-nil pointer") {
			t.Errorf("%s: %v (%v); want Permanent, naming the caller's target", name, out.Class(), out.Err)
		}
	}
}

// TestFromHTTPJSONReadsANilBodyAsNoBody: a success whose Body is nil (a
// response a host's fake RoundTripper or cache built by hand; net/http's
// Client puts an empty body there) holds no page, as an empty body does: it
// was a Success with v untouched and its Validate never asked, so a fake
// provider's "200 and nothing" read as a page of nothing, and a feed as
// caught up.
func TestFromHTTPJSONReadsANilBodyAsNoBody(t *testing.T) {
	t.Parallel()
	var p checkedPage
	out := forage.FromHTTPJSON(&http.Response{StatusCode: 200, Header: http.Header{}}, nil, &p)
	if out.Class() != forage.Transient || out.Err == nil || !strings.Contains(out.Err.Error(), "no body") {
		t.Errorf("a 200 with a nil Body: class %v (err %v); want Transient, saying it has no body", out.Class(), out.Err)
	}
	out = forage.FromHTTPJSON(&http.Response{StatusCode: 429, Header: http.Header{}}, nil, &p)
	if out.Class() != forage.Throttled {
		t.Errorf("a 429 with a nil Body: class %v (err %v); want Throttled", out.Class(), out.Err)
	}
}
