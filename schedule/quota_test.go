package schedule_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/schedule"
	"github.com/forage-go/forage/slice"
)

// pages is a Source of n one-record pages; the cursor is the number of
// pages read. It logs the cursor each request starts after, and when.
type pages struct {
	n    int
	mu   sync.Mutex
	from []string
	at   []time.Time
}

// Next plans the page after cursor, or reports the stream caught up.
func (p *pages) Next(_ context.Context, cursor []byte, _ checkpoint.Range) (slice.Slice, bool, error) {
	i, _ := strconv.Atoi(string(cursor)) // "" is 0
	return slice.Slice{}, i < p.n, nil
}

// Fetch "requests" the page after s.After.
func (p *pages) Fetch(_ context.Context, s slice.Slice) (slice.Page[int], forage.Outcome) {
	p.mu.Lock()
	p.from, p.at = append(p.from, string(s.After)), append(p.at, time.Now())
	p.mu.Unlock()
	i, _ := strconv.Atoi(string(s.After))
	return slice.Page[int]{Records: []int{i + 1}, Next: []byte(strconv.Itoa(i + 1))}, forage.Outcome{Status: 200}
}

// requests returns the cursors the requests started after, and when.
func (p *pages) requests() ([]string, []time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.from), slices.Clone(p.at)
}

// TestSpentKnownQuotaWaitsForReset: a backfill against a provider whose
// known quota (3 per hour, so one request every slot: 20 minutes and a
// margin of 2 s) is spent after
// its first page goes to waiting_rate_limit with its next run at the
// limit's next slot; it is not run again before then (one run, one request
// in the first slot, not a run a second); and each later run resumes
// from the committed cursor, so every page is requested once, a slot
// apart, until the stream is done. The stream is declared: the scheduler
// reads the runs' reports itself. The same holds for runs with a short
// RunFor (before, runs with a deadline stopped as deadline and were
// re-queued every second).
func TestSpentKnownQuotaWaitsForReset(t *testing.T) {
	t.Parallel()
	for _, runFor := range []time.Duration{0, 5 * time.Minute} { // 0: the default, a minute
		t.Run("deadline="+runFor.String(), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) { spentQuotaWaits(t, runFor) })
		})
	}
}

// spentQuotaWaits is TestSpentKnownQuotaWaitsForReset for runs with a
// deadline runFor after their start (0: none).
func spentQuotaWaits(t *testing.T, runFor time.Duration) {
	s, store := streamSched(t, schedule.Config{}, budget.RegistryConfig{Overrides: map[string]budget.Config{
		"hourly": {Limits: []budget.Limit{{Count: 3, Per: time.Hour}}},
	}})
	src := &pages{n: 4}
	begin := time.Now()
	if err := schedule.AddStream(t.Context(), s, schedule.Stream[int]{Name: "s", Provider: "hourly", Backfill: src, Sink: discard, RunFor: runFor}); err != nil {
		t.Fatal(err)
	}
	jobs, _ := store.List(t.Context(), schedule.Query{})
	job := jobs[0]
	stop := start(t, s)
	defer stop()

	time.Sleep(10 * time.Minute)
	synctest.Wait()
	j, _ := store.Get(t.Context(), job.ID)
	const slot = 20*time.Minute + 2*time.Second
	if from, _ := src.requests(); j.State != schedule.StateWaitingRateLimit || j.NextRun.Sub(begin) != slot ||
		j.Stats.Runs != 1 || len(from) != 1 {
		t.Fatalf("at +10m: state %s, next run +%v, %d runs, %d requests; want waiting_rate_limit, +%v, 1 run, 1 request",
			j.State, j.NextRun.Sub(begin), j.Stats.Runs, len(from), slot)
	}

	time.Sleep(2 * time.Hour)
	synctest.Wait()
	j, _ = store.Get(t.Context(), job.ID)
	from, at := src.requests()
	var offsets []time.Duration
	for _, a := range at {
		offsets = append(offsets, a.Sub(begin))
	}
	wantAt := []time.Duration{0, slot, 2 * slot, 3 * slot}
	if !slices.Equal(from, []string{"", "1", "2", "3"}) || !slices.Equal(offsets, wantAt) || j.State != schedule.StateSuccess || j.Stats.Runs != 4 {
		t.Fatalf("requests after cursors %q at %v, job %s after %d runs; want each page once at %v, success after 4 runs",
			from, offsets, j.State, j.Stats.Runs, wantAt)
	}
}
