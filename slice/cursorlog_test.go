package slice_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/retry"
	"github.com/forage-go/forage/slice"
)

const linkToken = "ghp_cursorS3CR3T"

// linkSource pages a feed whose next-page token is the provider's Link URL,
// which carries the credential when the provider takes it in the query
// (GitHub's ?access_token= did): pages 1..3, then a throttled answer.
type linkSource struct{}

func (linkSource) Next(ctx context.Context, cursor []byte, within checkpoint.Range) (slice.Slice, bool, error) {
	return slice.Slice{}, true, nil
}

func (linkSource) Fetch(ctx context.Context, s slice.Slice) (slice.Page[int], forage.Outcome) {
	n := 0
	if len(s.After) > 0 {
		fmt.Sscanf(string(s.After), "https://api.example.com/issues?page=%d", &n)
	}
	if n == 3 {
		return slice.Page[int]{}, forage.Outcome{Status: 429, RetryAfter: 3600e9}
	}
	next := fmt.Sprintf("https://api.example.com/issues?page=%d&access_token=%s", n+1, linkToken)
	return slice.Page[int]{Records: []int{n}, Next: []byte(next)}, forage.Outcome{Status: 200}
}

// TestACursorHoldingACredentialIsNeverLogged: a stream whose cursor is the
// provider's next-page URL, credential included, logs no credential, at any
// level (the cursor was logged as it is at each commit, at Debug, and with
// each deferral's gap, at Info).
func TestACursorHoldingACredentialIsNeverLogged(t *testing.T) {
	t.Parallel()
	prov, err := budget.NewLocal("api.example.com", budget.Config{Adaptive: aimd.Config{Initial: 1000, Max: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	r, err := slice.New(slice.Config[int]{Stream: "gh/issues", Mode: checkpoint.CatchUp, Store: checkpoint.NewMemoryStore(checkpoint.Config{}),
		Provider: prov, Source: linkSource{}, Sink: slice.SinkFunc[int](func(context.Context, slice.Page[int]) error { return nil }),
		Prefetch: slice.NoPrefetch, MaxBatch: 1,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Run(context.Background(), nil)
	if err != nil || rep.Slices != 3 || len(rep.Gaps) != 1 {
		t.Fatalf("run: %d slices, %d gaps, %v; want 3, 1 and a deferral", rep.Slices, len(rep.Gaps), err)
	}
	if strings.Contains(logs.String(), linkToken) {
		t.Fatalf("the credential in the cursor was logged:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "slice: committed") {
		t.Fatalf("no commit logged:\n%s", logs.String())
	}
	// The deferral names the last answer's status: "throttled" alone, or
	// "unavailable" after 503s, left which answer it was to Report.Stop.
	if !strings.Contains(logs.String(), "reason=throttled gap=1 status=429") {
		t.Fatalf("the deferral does not name the last answer's status:\n%s", logs.String())
	}
}

// TestARunsErrorNamesNoCredentialOfItsCursor: a run that fails after a
// page whose cursor is the provider's next-page URL, credential included,
// returns an error whose message masks it, and that errors.Is still
// matches (the message quoted the cursor whole to the host, which logged
// or stored it).
func TestARunsErrorNamesNoCredentialOfItsCursor(t *testing.T) {
	t.Parallel()
	prov, err := budget.NewLocal("api.example.com", budget.Config{Adaptive: aimd.Config{Initial: 1000, Max: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	full := errors.New("disk full")
	r, err := slice.New(slice.Config[int]{Stream: "gh/issues", Mode: checkpoint.CatchUp, Store: checkpoint.NewMemoryStore(checkpoint.Config{}),
		Provider: prov, Source: linkSource{}, Prefetch: slice.NoPrefetch, MaxBatch: 1,
		Sink: slice.SinkFunc[int](func(_ context.Context, p slice.Page[int]) error {
			if p.Records[0] == 1 {
				return full
			}
			return nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Run(context.Background(), nil)
	if !errors.Is(err, full) {
		t.Fatalf("run: %v; want the sink's error", err)
	}
	if strings.Contains(err.Error(), linkToken) || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("the run's error: %q; want the sink's error, and the cursor's credential masked", err)
	}
}

// TestAStopLogsWhatItHas: a run of a cursor stream stopped by a permanent
// answer logs "slice: stopped" (not "deferred": no later run does better
// alone), and no line of it shows a time or a range it does not have (each
// logged until=0001-01-01 and range=[0001-01-01, 0001-01-01), at every
// commit too).
func TestAStopLogsWhatItHas(t *testing.T) {
	t.Parallel()
	prov, err := budget.NewLocal("api.example.com", budget.Config{Adaptive: aimd.Config{Initial: 1000, Max: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	src := &failingFeed{after: 2}
	r, err := slice.New(slice.Config[int]{Stream: "api/events", Mode: checkpoint.CatchUp, Store: checkpoint.NewMemoryStore(checkpoint.Config{}),
		Provider: prov, Source: src, Sink: slice.SinkFunc[int](func(context.Context, slice.Page[int]) error { return nil }),
		Prefetch: slice.NoPrefetch, MaxBatch: 1,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Run(context.Background(), nil)
	if rep.Stop == nil || rep.Stop.Reason != forage.ReasonPermanent {
		t.Fatalf("run: %+v, %v; want a permanent stop", rep, err)
	}
	out := logs.String()
	if !strings.Contains(out, `msg="slice: stopped"`) || strings.Contains(out, "slice: deferred") {
		t.Errorf("a permanent stop is not logged as stopped:\n%s", out)
	}
	if strings.Contains(out, "0001-01-01") || strings.Contains(out, "range=") {
		t.Errorf("a zero time or range is logged:\n%s", out)
	}
	if !strings.Contains(out, "slice: committed") {
		t.Errorf("no commit logged:\n%s", out)
	}
}

// failingFeed pages a cursor feed, one record a page, and answers 401 after
// its first after pages.
type failingFeed struct{ after, calls int }

func (*failingFeed) Next(context.Context, []byte, checkpoint.Range) (slice.Slice, bool, error) {
	return slice.Slice{}, true, nil
}

func (f *failingFeed) Fetch(context.Context, slice.Slice) (slice.Page[int], forage.Outcome) {
	if f.calls++; f.calls > f.after {
		return slice.Page[int]{}, forage.Outcome{Status: 401}
	}
	return slice.Page[int]{Records: []int{f.calls}, Next: fmt.Appendf(nil, "p%d", f.calls)}, forage.Outcome{Status: 200}
}

// TestAFetchFuncFeedIsNotFilled: a cursor feed has no time ranges, so a
// Fill of one is an error, not a range called done with nothing fetched;
// its stream runs page after the provider's tokens.
func TestAFetchFuncFeedIsNotFilled(t *testing.T) {
	t.Parallel()
	prov, err := budget.NewLocal("api.example.com", budget.Config{Adaptive: aimd.Config{Initial: 1000, Max: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	feed := slice.FetchFunc[int](func(_ context.Context, s slice.Slice) (slice.Page[int], forage.Outcome) {
		calls++
		return slice.Page[int]{Records: []int{calls}, Next: fmt.Appendf(nil, "t%d", calls), Last: calls == 3}, forage.Outcome{Status: 200}
	})
	r, err := slice.New(slice.Config[int]{Stream: "api/events", Mode: checkpoint.CatchUp, Store: checkpoint.NewMemoryStore(checkpoint.Config{}),
		Provider: prov, Source: feed, Sink: slice.SinkFunc[int](func(context.Context, slice.Page[int]) error { return nil })})
	if err != nil {
		t.Fatal(err)
	}
	day := checkpoint.Range{Start: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), End: time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)}
	if rep, err := r.Fill(context.Background(), nil, []checkpoint.Range{day}); err == nil || calls != 0 {
		t.Fatalf("Fill = %+v, %v after %d requests; want an error and none", rep, err, calls)
	}
	rep, err := r.Run(context.Background(), nil)
	if err != nil || rep.Records != 3 || string(rep.Cursor) != "t3" {
		t.Fatalf("Run = %d records at %q, %v; want 3 at t3", rep.Records, rep.Cursor, err)
	}
}

// TestAPageNotYetIsBehindNotCaughtUp: a page that made no progress while
// the Source says what it asks for is due (Page.NotYet) stops the run
// behind, with a gap record and when to ask again, not caught up; the run
// after, once the provider has published, collects it and resolves the
// gap. (Read as caught up, a backfill was done with its last records
// missing.)
func TestAPageNotYetIsBehindNotCaughtUp(t *testing.T) {
	t.Parallel()
	prov, err := budget.NewLocal("api.example.com", budget.Config{Adaptive: aimd.Config{Initial: 1000, Max: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	published, again := 2, time.Now().Add(time.Hour) // pages the provider has published; when the third is due
	feed := slice.FetchFunc[int](func(_ context.Context, s slice.Slice) (slice.Page[int], forage.Outcome) {
		n := 0
		if len(s.After) > 0 {
			fmt.Sscanf(string(s.After), "p%d", &n)
		}
		switch {
		case n == 3:
			return slice.Page[int]{Next: s.After, Last: true}, forage.Outcome{Status: 200} // the end: caught up
		case n >= published:
			return slice.Page[int]{Next: s.After, NotYet: again}, forage.Outcome{Status: 200}
		}
		return slice.Page[int]{Records: []int{n + 1}, Next: fmt.Appendf(nil, "p%d", n+1)}, forage.Outcome{Status: 200}
	})
	store := checkpoint.NewMemoryStore(checkpoint.Config{})
	var got []int
	r, err := slice.New(slice.Config[int]{Stream: "api/events", Mode: checkpoint.CatchUp, Store: store, Provider: prov, Source: feed,
		Sink: slice.SinkFunc[int](func(_ context.Context, p slice.Page[int]) error { got = append(got, p.Records...); return nil })})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Run(context.Background(), nil)
	if err != nil || rep.Reason != forage.ReasonBehind || !rep.Until.Equal(again) || len(rep.Gaps) != 1 || len(got) != 2 {
		t.Fatalf("Run = %+v, %v, %v stored; want behind until %v with a gap, 2 stored", rep, err, got, again)
	}
	published = 3
	rep, err = r.Run(context.Background(), nil)
	if err != nil || rep.Reason != "" || rep.Resolved != 1 || len(got) != 3 {
		t.Fatalf("second Run = %+v, %v, %v stored; want caught up, the gap resolved, 3 stored", rep, err, got)
	}
}

// TestAStuckCursorIsNeverCaughtUp: a FetchFunc page with nothing in it,
// the cursor it was asked after as its next, and no Last (has_more true,
// the same token) is a stuck cursor. Read as caught up, a run ended done
// with 1,750 of 2,000 events never fetched. It is asked again; a provider
// that stays stuck stops the run unavailable with a gap record and the
// checkpoint where it was, and one that answers on the retry is collected
// whole. At the feed's very start too (the first answer empty, with no
// token, has_more true), where a run ended done with nothing fetched.
func TestAStuckCursorIsNeverCaughtUp(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ at, stuck int }{{3, 1}, {3, 1000}, {0, 1}, {0, 1000}} {
		at, stuck := c.at, c.stuck
		t.Run(fmt.Sprintf("at page %d stuck for %d", at, stuck), func(t *testing.T) {
			prov, err := budget.NewLocal("api.example.com", budget.Config{Adaptive: aimd.Config{Initial: 1000, Max: 1000},
				Backoff: retry.BackoffConfig{Base: time.Microsecond, Cap: time.Microsecond}})
			if err != nil {
				t.Fatal(err)
			}
			left := stuck // answers at page at that repeat its token
			feed := slice.FetchFunc[int](func(_ context.Context, s slice.Slice) (slice.Page[int], forage.Outcome) {
				n := 0
				if len(s.After) > 0 {
					fmt.Sscanf(string(s.After), "p%d", &n)
				}
				if n == at && left > 0 {
					left--
					return slice.Page[int]{Next: s.After}, forage.Outcome{Status: 200} // has_more true, the same token
				}
				return slice.Page[int]{Records: []int{n + 1}, Next: fmt.Appendf(nil, "p%d", n+1), Last: n+1 == 8}, forage.Outcome{Status: 200}
			})
			store := checkpoint.NewMemoryStore(checkpoint.Config{})
			var got []int
			r, err := slice.New(slice.Config[int]{Stream: "api/events", Mode: checkpoint.SteadyState, Store: store, Provider: prov, Source: feed,
				Sink: slice.SinkFunc[int](func(_ context.Context, p slice.Page[int]) error { got = append(got, p.Records...); return nil })})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := r.Run(context.Background(), nil)
			if stuck == 1 {
				if err != nil || rep.Reason != "" || len(got) != 8 {
					t.Fatalf("Run = %+v, %v, %v stored; want caught up with all 8, the stuck answer asked again", rep, err, got)
				}
				return
			}
			want := ""
			if at > 0 {
				want = fmt.Sprintf("p%d", at)
			}
			if rep.Reason == "" || len(rep.Gaps) != 1 || string(rep.Cursor) != want || len(got) != at {
				t.Fatalf("Run = reason %q, %d gaps, cursor %q, %v, %v stored; want a stop that is not caught up, a gap at %q, %d stored", rep.Reason, len(rep.Gaps), rep.Cursor, err, got, want, at)
			}
			if rep.Stop == nil || !strings.Contains(rep.Stop.Error(), "stuck cursor") || !strings.Contains(rep.Gaps[0].Reason, "stuck cursor") {
				t.Fatalf("Stop = %v, gap %q; want both to name the stuck cursor (the gap read \"unavailable\" alone, as for an outage)", rep.Stop, rep.Gaps[0].Reason)
			}
		})
	}
}
