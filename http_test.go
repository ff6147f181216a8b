package forage_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/forage-go/forage"
)

// now is the reference time of the header tests: the RFC 9110 example date.
var now = time.Date(1994, time.November, 6, 8, 49, 37, 0, time.UTC)

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		value  string
		want   time.Duration
		wantOK bool
	}{
		// delta-seconds
		{"0", 0, true},
		{"120", 2 * time.Minute, true},
		{"  120\t", 2 * time.Minute, true},
		{"007", 7 * time.Second, true},
		{"259200", forage.MaxRetryAfter, true},
		{"259201", forage.MaxRetryAfter, true},
		{"99999999999999999999999999999999", forage.MaxRetryAfter, true},
		// HTTP-date, all three forms
		{"Sun, 06 Nov 1994 08:51:37 GMT", 2 * time.Minute, true},      // IMF-fixdate
		{"Sunday, 06-Nov-94 08:51:37 GMT", 2 * time.Minute, true},     // RFC 850
		{"Sun Nov  6 08:51:37 1994", 2 * time.Minute, true},           // asctime
		{" Sun, 06 Nov 1994 08:49:38 GMT ", time.Second, true},        // trimmed
		{"Sun, 06 Nov 1994 08:49:37 GMT", 0, true},                    // now
		{"Sun, 06 Nov 1994 08:00:00 GMT", 0, true},                    // past: retry now
		{"Thu, 01 Jan 1970 00:00:00 GMT", 0, true},                    // long past
		{"Fri, 31 Dec 9999 23:59:59 GMT", forage.MaxRetryAfter, true}, // far future
		{"Wed, 09 Nov 1994 08:49:37 GMT", 72 * time.Hour, true},       // exactly the cap
		{"Wed, 09 Nov 1994 08:49:36 GMT", 72*time.Hour - time.Second, true},
		// delta-seconds with a fraction: not the RFC's grammar, but what
		// providers send (Shopify: "2.0"); rounded up to the millisecond
		{"2.0", 2 * time.Second, true},
		{"1.5", 1500 * time.Millisecond, true},
		{" 0.25 ", 250 * time.Millisecond, true},
		{"0.0001", time.Millisecond, true},
		{"0.000", 0, true},
		{"1.2340000", 1234 * time.Millisecond, true},
		{"99999999999999999999.5", forage.MaxRetryAfter, true},
		// invalid
		{"", 0, false},
		{"   ", 0, false},
		{"-1", 0, false},
		{"+5", 0, false},
		{"1e3", 0, false},
		{"1.", 0, false},
		{".5", 0, false},
		{"1.5.0", 0, false},
		{"-1.5", 0, false},
		{"0x10", 0, false},
		{"12 34", 0, false},
		{"120s", 0, false},
		{"soon", 0, false},
		{"١٢٠", 0, false}, // Arabic-Indic digits are not DIGIT
		{"Sun, 06 Nov 1994 25:00:00 GMT", 0, false},
		{"2024-01-01T00:00:00Z", 0, false}, // RFC 3339 is not an HTTP-date
	}
	for _, tt := range tests {
		got, ok := forage.ParseRetryAfter(tt.value, now)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.value, got, ok, tt.want, tt.wantOK)
		}
	}
}

// TestParseRetryAfterSeconds: any non-negative integer round-trips, capped at
// MaxRetryAfter.
func TestParseRetryAfterSeconds(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		secs := rapid.Uint64().Draw(rt, "secs")
		got, ok := forage.ParseRetryAfter(strconv.FormatUint(secs, 10), now)
		want := forage.MaxRetryAfter
		if secs < uint64(forage.MaxRetryAfter/time.Second) {
			want = time.Duration(secs) * time.Second
		}
		if !ok || got != want {
			rt.Fatalf("ParseRetryAfter(%d) = %v, %v; want %v, true", secs, got, ok, want)
		}
	})
}

// TestParseRetryAfterFraction: delta-seconds with a fraction wait at least
// as long as they say, and less than a millisecond more.
func TestParseRetryAfterFraction(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		secs := rapid.Uint64Range(0, 1e6).Draw(rt, "secs")
		frac := rapid.StringMatching(`[0-9]{1,12}`).Draw(rt, "frac")
		got, ok := forage.ParseRetryAfter(fmt.Sprintf("%d.%s", secs, frac), now)
		exact, err := strconv.ParseFloat(fmt.Sprintf("%d.%s", secs, frac), 64)
		if err != nil {
			rt.Fatal(err)
		}
		want := time.Duration(exact * float64(time.Second))
		if !ok || got < min(want, forage.MaxRetryAfter)-time.Microsecond || got > min(want+time.Millisecond, forage.MaxRetryAfter) {
			rt.Fatalf("ParseRetryAfter(%d.%s) = %v, %v; want %v rounded up to the millisecond", secs, frac, got, ok, want)
		}
	})
}

// TestParseRetryAfterDate: an HTTP-date d seconds from now (any sub-second
// now) parses to the exact distance, clamped into [0, MaxRetryAfter].
func TestParseRetryAfterDate(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		base := time.Unix(rapid.Int64Range(0, 1<<35).Draw(rt, "unix"), 0).UTC()
		at := base.Add(time.Duration(rapid.Int64Range(-1e6, 1e6).Draw(rt, "delta")) * time.Second)
		nowish := base.Add(time.Duration(rapid.Int64Range(0, 999_999_999).Draw(rt, "nanos")))
		got, ok := forage.ParseRetryAfter(at.Format(http.TimeFormat), nowish)
		want := min(max(at.Sub(nowish), 0), forage.MaxRetryAfter)
		if !ok || got != want {
			rt.Fatalf("ParseRetryAfter(%q) at %v = %v, %v; want %v, true", at.Format(http.TimeFormat), nowish, got, ok, want)
		}
	})
}

func BenchmarkParseRetryAfter(b *testing.B) {
	for _, v := range []string{"120", "Sun, 06 Nov 1994 08:51:37 GMT"} {
		b.Run(v, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				forage.ParseRetryAfter(v, now)
			}
		})
	}
}

// TestPropertyRetryAfterOnTheProvidersClock: a provider whose clock is
// off by up to a day either way, answering with a Date header and a
// Retry-After date w seconds after its Date, is waited for w seconds, give
// or take the second Date is truncated to: never less (it said "retry now"
// read against our clock when its clock ran behind), and never minutes
// more when it ran ahead. An X-RateLimit-Reset Unix time is the same
// moment: read against its Date when the clocks differ by more than 2 s,
// against ours (finer than Date's second) when they do not.
func TestPropertyRetryAfterOnTheProvidersClock(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		skew := time.Duration(rapid.Int64Range(-int64(24*time.Hour), int64(24*time.Hour)).Draw(t, "skew"))
		w := rapid.IntRange(1, 3600).Draw(t, "wait")
		theirs := time.Now().Add(skew).Truncate(time.Second)
		h := http.Header{}
		h.Set("Date", theirs.UTC().Format(http.TimeFormat))
		if rapid.Bool().Draw(t, "reset") {
			h.Set("X-RateLimit-Limit", "100")
			h.Set("X-RateLimit-Remaining", "0")
			h.Set("X-RateLimit-Reset", strconv.FormatInt(theirs.Add(time.Duration(w)*time.Second).Unix(), 10))
			o := forage.FromHTTP(&http.Response{StatusCode: http.StatusOK, Header: h}, nil)
			got, want := o.Quota.Reset, time.Duration(w)*time.Second
			seen := time.Since(theirs).Abs() // as FromHTTP sees it: Date is cut to the second
			if (seen - 2*time.Second).Abs() < 50*time.Millisecond {
				return // at the edge, FromHTTP may have seen it either way
			}
			if seen <= 2*time.Second {
				// Clocks within a couple of seconds: read against ours,
				// finer than Date's second (the reset is a moment).
				want += skew
			}
			// The reset is a whole second of theirs: read against ours, up
			// to a second sooner than want, and the time this check took
			// on a loaded machine (a tolerance of a second flat failed
			// when the second was nearly over: 2m36.0s against 2m37.00025s).
			if !o.Quota.HasReset || got > want+50*time.Millisecond || got < want-time.Second-200*time.Millisecond {
				t.Fatalf("reset %v (known %v) with the provider's clock %v off ours, want %v within a second", got, o.Quota.HasReset, skew, want)
			}
			return
		}
		h.Set("Retry-After", theirs.Add(time.Duration(w)*time.Second).UTC().Format(http.TimeFormat))
		o := forage.FromHTTP(&http.Response{StatusCode: http.StatusTooManyRequests, Header: h}, nil)
		if got, want := o.RetryAfter, time.Duration(w)*time.Second; got < want || got > want+time.Second {
			t.Fatalf("Retry-After %v with the provider's clock %v off ours, want %v", got, skew, want)
		}
	})
}

// TestAMillisecondResetIsNotReadAgainstDate: a reset given in Unix
// milliseconds 400 ms ahead, from a provider whose clock agrees with ours,
// is 400 ms away, not up to 1.4 s (Date is cut to the second: read
// against it, a bucket's next token became a spent window's pause); and a
// cache's copy (Age) is read against when the provider made it.
func TestAMillisecondResetIsNotReadAgainstDate(t *testing.T) {
	now := time.Now()
	h := http.Header{}
	h.Set("Date", now.UTC().Format(http.TimeFormat))
	h.Set("X-RateLimit-Limit", "10")
	h.Set("X-RateLimit-Remaining", "0")
	h.Set("X-RateLimit-Reset", strconv.FormatInt(now.Add(400*time.Millisecond).UnixMilli(), 10))
	o := forage.FromHTTP(&http.Response{StatusCode: http.StatusOK, Header: h}, nil)
	if got := o.Quota.Reset; got > 450*time.Millisecond || got < 300*time.Millisecond {
		t.Errorf("a reset 400 ms ahead in milliseconds reads %v, want about 400ms", got)
	}
	cached := http.Header{}
	made := now.Add(-time.Hour)
	cached.Set("Date", made.UTC().Format(http.TimeFormat))
	cached.Set("Age", "3600")
	cached.Set("Retry-After", made.Add(time.Hour+30*time.Second).UTC().Format(http.TimeFormat))
	if got := forage.FromHTTP(&http.Response{StatusCode: http.StatusTooManyRequests, Header: cached}, nil).RetryAfter; got < 29*time.Second || got > 31*time.Second {
		t.Errorf("a cache's copy an hour old, Retry-After 30 s after it was served: %v, want about 30s", got)
	}
	// An Age the Date does not bear out (garbage, or a fresh Date) never
	// shortens the wait by more than the clocks' slack.
	for _, age := range []string{"120", "999999999999"} {
		h := http.Header{}
		h.Set("Date", now.UTC().Format(http.TimeFormat))
		h.Set("Age", age)
		h.Set("Retry-After", now.Add(60*time.Second).UTC().Format(http.TimeFormat))
		if got := forage.FromHTTP(&http.Response{StatusCode: http.StatusTooManyRequests, Header: h}, nil).RetryAfter; got < 57*time.Second {
			t.Errorf("Age %s on a fresh Date, Retry-After 60 s on: %v, want about a minute", age, got)
		}
	}
}

// TestAHostileRetryAfterIsReadWithBoundedWork: a Retry-After of a million
// bytes of commas, or of a hundred thousand lines, costs FromHTTP a bounded
// amount of work (allocations stand for it here): a provider reads as many
// as an intermediary merges, a few, and no more are read. Each part was
// parsed as a delta and, with its neighbour, as a date: 0.4 s of CPU per
// such answer, with a string made for each of 500,000 parts.
func TestAHostileRetryAfterIsReadWithBoundedWork(t *testing.T) {
	lines := make([]string, 100_000)
	for i := range lines {
		lines[i] = "Sun, 06 Nov 1994 08:49:37 GMT, x"
	}
	for name, h := range map[string]http.Header{
		"commas": {"Retry-After": {strings.Repeat("x,", 500_000) + "120"}},
		"lines":  {"Retry-After": append(lines, "120")},
		"ms":     {"Retry-After-Ms": append(lines, "120000")},
		"merged": {"Retry-After": {"1, 120"}},
		"two":    {"Retry-After": {"1", "120"}},
	} {
		resp := &http.Response{StatusCode: http.StatusTooManyRequests, Header: h}
		if n := testing.AllocsPerRun(2, func() { forage.FromHTTP(resp, nil) }); n > 1000 {
			t.Errorf("%s: FromHTTP made %.0f allocations", name, n)
		}
		if name == "merged" || name == "two" {
			if got := forage.FromHTTP(resp, nil).RetryAfter; got != 120*time.Second {
				t.Errorf("%s: Retry-After %v, want 2m0s (the longest of a few)", name, got)
			}
		}
	}
}
