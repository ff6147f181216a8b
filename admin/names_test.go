package admin_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/schedule"
)

// badNames break the name rule every store applies: invalid UTF-8, NUL,
// an escape sequence, a newline, and one byte too many.
var badNames = []string{
	"binance/BTC\xff", "p\x00", "a\x1b[31mred", "two\nlines", "c1\u0085", strings.Repeat("n", checkpoint.MaxNameLen+1),
}

// TestUpsertRefusesBadNames (regression: job names bypassed the name
// rule): POST /jobs answered 201 to names with NUL or ESC, which the
// PostgreSQL store refuses. Now it answers 400 naming the field and
// stores nothing; what the rule allows stays allowed.
func TestUpsertRefusesBadNames(t *testing.T) {
	t.Parallel()
	a := newAPI(t, schedule.Config{}, nil)
	for _, bad := range badNames {
		if !utf8.ValidString(bad) {
			continue // JSON decoding turns it into U+FFFD, a valid name
		}
		for _, field := range []string{"provider", "stream"} {
			spec := map[string]string{"provider": "p", "kind": "backfill", "stream": "s"}
			spec[field] = bad
			body, _ := json.Marshal(spec)
			a.wantBad("POST", "/jobs", string(body), field)
		}
	}
	if jobs, _ := a.s.Store().List(context.Background(), schedule.Query{}); len(jobs) != 0 {
		t.Fatalf("%d jobs stored after only invalid upserts", len(jobs))
	}
	for _, good := range []string{"börse/BTC €", "a b", "\uFFFD", strings.Repeat("n", checkpoint.MaxNameLen)} {
		body, _ := json.Marshal(map[string]string{"provider": good, "kind": "backfill", "stream": good})
		a.want("POST", "/jobs", string(body), 201, nil)
	}
}

// TestProviderPauseRefusesBadNames: a provider name in the path meets the
// same rule (400, naming "name").
func TestProviderPauseRefusesBadNames(t *testing.T) {
	t.Parallel()
	a := newAPI(t, schedule.Config{}, nil)
	for _, path := range []string{"/providers/p%00/pause", "/providers/p%1B/pause", "/providers/p%FF/resume"} {
		a.wantBad("POST", path, "", "name")
	}
}
