package forage

import "testing"

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
	} {
		if got := http2Class(msg); got != want {
			t.Errorf("http2Class(%q) = %v, want %v", msg, got, want)
		}
	}
}
