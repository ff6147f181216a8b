package forage_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/forage-go/forage"
)

// One HTTP exchange read into an Outcome, and what its Class says.
func ExampleFromHTTP() {
	resp := &http.Response{ // setup: a 429 as a client would return it
		StatusCode: http.StatusTooManyRequests,
		Header:     http.Header{"Retry-After": {"30"}, "X-Ratelimit-Limit": {"600"}, "X-Ratelimit-Remaining": {"0"}},
	}
	o := forage.FromHTTP(resp, nil)
	c := o.Class()
	fmt.Println(o.Status, o.RetryAfter, c, c.Retryable())
	left, _ := o.Quota.Left()
	fmt.Println(o.Quota.Limit, left)
	// Output:
	// 429 30s throttled true
	// 600 0
}

// ExampleFromHTTPJSON reads a JSON API's answer in one call: a page is
// decoded; an HTML error page sent with 200 is a Transient failure that
// names what came (asked again, never a page skipped), quoting nothing of
// it.
func ExampleFromHTTPJSON() {
	answer := func(contentType, body string) *http.Response { // setup: as client.Do returns it
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {contentType}}, Body: io.NopCloser(strings.NewReader(body))}
	}
	for _, resp := range []*http.Response{
		answer("application/json", `{"items":[1,2,3],"next":"c3"}`),
		answer("text/html", "<html>Bad gateway</html>"),
	} {
		var page struct {
			Items []int
			Next  string
		}
		out := forage.FromHTTPJSON(resp, nil, &page)
		fmt.Printf("%v %v %q\n", out.Class(), page.Items, page.Next)
		if out.Err != nil {
			fmt.Println(out.Err)
		}
	}
	// Output:
	// success [1 2 3] "c3"
	// transient [] ""
	// forage: the body of an HTTP 200 answer is not the JSON expected (Content-Type "text/html"): invalid character '<' looking for beginning of value
}

// ExampleReason shows the two families of stop reasons.
func ExampleReason() {
	for _, r := range []forage.Reason{forage.ReasonRequestCap, forage.ReasonThrottled, forage.ReasonPermanent} {
		fmt.Printf("%-12s exhausted=%-5v source_pressure=%v\n", r, r.Exhausted(), r.SourcePressure())
	}
	// Output:
	// request_cap  exhausted=true  source_pressure=false
	// throttled    exhausted=false source_pressure=true
	// permanent    exhausted=false source_pressure=false
}

// ExampleFromHTTP_usedWeight builds an Outcome from a response: status, Retry-After and
// rate-limit headers.
func ExampleFromHTTP_usedWeight() {
	resp := &http.Response{StatusCode: 429, Header: http.Header{}, Body: http.NoBody} // setup
	resp.Header.Set("Retry-After", "2")
	resp.Header.Set("X-MBX-USED-WEIGHT-1M", "1180")
	out := forage.FromHTTP(resp, nil)
	fmt.Println(out.Status, out.RetryAfter, out.Quota.Used, out.Quota.Window)
	// Output:
	// 429 2s 1180 1m0s
}

// A host marks an error it found in a 200 body with the class it means.
func ExampleMark() {
	truncated := forage.Mark(errors.New("unexpected end of JSON input"), forage.Transient)
	fmt.Println(forage.Outcome{Status: http.StatusOK, Err: truncated}.Class())
	unreadable := forage.Mark(errors.New("unknown schema v3"), forage.Permanent)
	fmt.Println(forage.Outcome{Status: http.StatusOK, Err: unreadable}.Class())
	// Output:
	// transient
	// permanent
}

func ExampleParseRetryAfter() {
	now := time.Date(2024, time.March, 1, 12, 0, 0, 0, time.UTC)
	for _, v := range []string{"120", "Fri, 01 Mar 2024 12:00:30 GMT", "Fri, 01 Mar 2024 11:00:00 GMT", "1.5", "999999999"} {
		d, ok := forage.ParseRetryAfter(v, now)
		fmt.Printf("%q: %v %v\n", v, d, ok)
	}
	// Output:
	// "120": 2m0s true
	// "Fri, 01 Mar 2024 12:00:30 GMT": 30s true
	// "Fri, 01 Mar 2024 11:00:00 GMT": 0s true
	// "1.5": 1.5s true
	// "999999999": 72h0m0s true
}

func ExampleParseQuota() {
	now := time.Date(2024, time.March, 1, 12, 0, 0, 0, time.UTC)
	h := http.Header{}
	h.Set("X-MBX-USED-WEIGHT-1M", "1150") // Binance: weight used this minute
	rl, _ := forage.ParseQuota(h, now)
	fmt.Println(rl.Used, rl.Window, rl.HasLimit)

	h = http.Header{}
	h.Set("RateLimit", "limit=100, remaining=3, reset=12")
	rl, _ = forage.ParseQuota(h, now)
	fmt.Println(rl.Limit, rl.Remaining, rl.Reset)
	// Output:
	// 1150 1m0s false
	// 100 3 12s
}

// Outcome.Class of a status alone and of an error alone.
func ExampleOutcome_Class() {
	fmt.Println(forage.Outcome{Status: http.StatusTooManyRequests}.Class())
	fmt.Println(forage.Outcome{Status: http.StatusTeapot}.Class()) // Binance IP ban
	fmt.Println(forage.Outcome{Status: http.StatusServiceUnavailable}.Class())
	fmt.Println(forage.Outcome{Status: http.StatusBadGateway}.Class())
	fmt.Println(forage.Outcome{Status: http.StatusNotFound}.Class())
	fmt.Println(forage.Outcome{Err: context.DeadlineExceeded}.Class()) // the attempt's own timeout
	fmt.Println(forage.Outcome{Err: context.Canceled}.Class())
	c := forage.Outcome{Err: errors.New("bad json")}.Class()
	fmt.Println(c, c.Retryable())
	// Output:
	// throttled
	// throttled
	// overloaded
	// transient
	// permanent
	// transient
	// canceled
	// permanent false
}

// An error of http.Client.Do holds the request's URL, query and all: masked
// before it is logged.
func ExampleRedact() {
	client := &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) { // setup: a transport that fails
		return nil, errors.New("connection refused")
	})}
	_, err := client.Get("https://api.example.com/v1/orders?apiKey=s3cr3t&symbol=BTCUSDT")
	err = forage.Redact(err)
	fmt.Println(err)
	var ue *url.Error
	fmt.Println(errors.As(err, &ue))
	// Output:
	// Get "https://api.example.com/v1/orders?apiKey=REDACTED&symbol=BTCUSDT": connection refused
	// true
}

// roundTripFunc is an http.RoundTripper of a func.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
