package schedule_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/schedule"
)

// TestOneDecision (once Example Scheduler.ClaimAt): in one claim, gap
// fills first, then fresh data, at most two per provider, never two jobs
// of one stream at once (the gap fill holds BTC-USDT/1h); backfills only
// for providers with no head work left.
func TestOneDecision(t *testing.T) {
	t.Parallel()
	s, _ := newSched(t, schedule.Config{MaxRunning: 4, MaxPerProvider: 2}, nil)
	for _, spec := range []schedule.Spec{
		{Provider: "binance", Kind: schedule.KindBackfill, Stream: "BTC-USDT/1h"},
		{Provider: "binance", Kind: schedule.KindIncremental, Stream: "BTC-USDT/1h", Interval: time.Hour},
		{Provider: "binance", Kind: schedule.KindIncremental, Stream: "ETH-USDT/1h", Interval: time.Hour},
		{Provider: "binance", Kind: schedule.KindGapFill, Stream: "BTC-USDT/1h"},
		{Provider: "kraken", Kind: schedule.KindBackfill, Stream: "XBT-USD/1h"},
		{Provider: "kraken", Kind: schedule.KindRefresh, Stream: "markets", Interval: 12 * time.Hour},
	} {
		upsert(t, s, t0, spec)
	}
	var got []string
	for _, j := range claim(t, s, t0) {
		got = append(got, j.Provider+" "+string(j.Kind)+" "+j.Stream)
	}
	want := []string{"binance gap_fill BTC-USDT/1h", "binance incremental ETH-USDT/1h", "kraken refresh markets"}
	if !slices.Equal(got, want) {
		t.Fatalf("claimed %q, want %q in that order", got, want)
	}
}

// TestFinishExhaustedAndThrottled (once Example Scheduler.FinishAt): a run
// that spent its request cap is re-queued after Requeue with no cool-down;
// one that met a 429 with Retry-After waits for the reset, and so does
// every other job of its provider.
func TestFinishExhaustedAndThrottled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newSched(t, schedule.Config{}, nil)
	upsert(t, s, t0, schedule.Spec{Provider: "binance", Kind: schedule.KindBackfill, Stream: "BTC-USDT/1m"})
	upsert(t, s, t0, schedule.Spec{Provider: "binance", Kind: schedule.KindBackfill, Stream: "ETH-USDT/1m"})
	jobs := claim(t, s, t0)
	if len(jobs) != 2 {
		t.Fatalf("claimed %v, want both backfills", streams(jobs))
	}
	j, err := s.FinishAt(ctx, t0, jobs[0], schedule.Result{}, &budget.Error{Reason: forage.ReasonRequestCap})
	if err != nil || j.State != schedule.StateQueued || j.NextRun.Sub(t0) != time.Second {
		t.Fatalf("after the request cap: %s again in %v (%v), want queued again in 1s", j.State, j.NextRun.Sub(t0), err)
	}
	j, err = s.FinishAt(ctx, t0, jobs[1], schedule.Result{}, &budget.Error{Reason: forage.ReasonThrottled, Until: t0.Add(30 * time.Second)})
	if err != nil || j.State != schedule.StateWaitingRateLimit || j.NextRun.Sub(t0) != 30*time.Second {
		t.Fatalf("after the 429: %s again in %v (%v), want waiting_rate_limit again in 30s", j.State, j.NextRun.Sub(t0), err)
	}
	if n := len(claim(t, s, t0.Add(10*time.Second))); n != 0 {
		t.Fatalf("claimed %d at +10s, while binance cools", n)
	}
	if n := len(claim(t, s, t0.Add(30*time.Second))); n != 2 {
		t.Fatalf("claimed %d at +30s, want both", n)
	}
}
