package forage

import (
	"testing"
	"time"
)

// The HTTP/2 client's errors, known by their text (its types are
// unexported): resets and connections going away are transient,
// ENHANCE_YOUR_CALM is the provider asking to slow down, a broken exchange
// is permanent, and anything else stays permanent.
func TestHTTP2ErrorsAreClassified(t *testing.T) {
	for msg, want := range map[string]Class{
		"stream error: stream ID 1; INTERNAL_ERROR; received from peer":                                   Transient,
		"stream error: stream ID 3; REFUSED_STREAM; received from peer":                                   Transient,
		"stream error: stream ID 5; ENHANCE_YOUR_CALM; received from peer":                                Overloaded,
		`http2: server sent GOAWAY and closed the connection; LastStreamID=1, ErrCode=NO_ERROR, debug=""`: Transient,
		"stream error: stream ID 7; PROTOCOL_ERROR; received from peer":                                   Permanent,
		"some other failure": Permanent,
		"http2: request body larger than specified content length": Permanent,
		"http2: invalid Authorization header field value":          Permanent,
	} {
		if got := http2Class(msg); got != want {
			t.Errorf("http2Class(%q) = %v, want %v", msg, got, want)
		}
	}
}

// Retry-After given more than once, as lines or merged by an intermediary,
// is read as the longest pause it asks for; an HTTP-date's comma is not a
// separator.
func TestRetryAfterGivenTwiceIsTheLongest(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		values []string
		want   time.Duration
	}{
		{[]string{"1", "120"}, 120 * time.Second},
		{[]string{"120, 120"}, 120 * time.Second},
		{[]string{"5, garbage, 30"}, 30 * time.Second},
		{[]string{"Wed, 01 Jan 2025 00:01:00 GMT"}, time.Minute},
		{[]string{"Wed, 01 Jan 2025 00:01:00 GMT, Wed, 01 Jan 2025 00:02:00 GMT"}, 2 * time.Minute},
		{[]string{"Wed, 01 Jan 2025 00:30:00 GMT, 5"}, 30 * time.Minute},
		{[]string{"garbage"}, 0},
		{nil, 0},
	} {
		if got := retryAfter(c.values, now); got != c.want {
			t.Errorf("retryAfter(%q) = %v, want %v", c.values, got, c.want)
		}
	}
}

// 529, a site overloaded (Anthropic's overloaded_error, Qualys), sheds
// load as 503 does: Overloaded, so the rate comes down (30 of them left a
// provider's rate at 1000/s, where 30 503s cut it to 1/s).
func TestA529IsOverloaded(t *testing.T) {
	if got := classifyStatus(529); got != Overloaded {
		t.Errorf("classifyStatus(529) = %v, want %v", got, Overloaded)
	}
}
