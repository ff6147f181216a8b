package schedule_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/forage-go/forage/schedule"
)

// TestThousandsOfStreamsOnOneProviderTakeTurns: 2,000 backfills and 200
// incremental jobs (every 10 minutes) over one provider that runs two at
// once, each run a second long and never done: every backfill starts again
// within a round of all of them (1,000 s of two at a time, plus the head
// work's share), and every incremental job runs each cycle. No stream
// starves.
func TestThousandsOfStreamsOnOneProviderTakeTurns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newSched(t, schedule.Config{MaxRunning: 2, MaxPerProvider: 2, Random: noJitter, Jitter: schedule.NoJitter}, nil)
	const backfills, heads = 2000, 200
	for i := range backfills {
		upsert(t, s, t0, schedule.Spec{Provider: "p", Kind: schedule.KindBackfill, Stream: fmt.Sprintf("b%04d", i)})
	}
	for i := range heads {
		upsert(t, s, t0, schedule.Spec{Provider: "p", Kind: schedule.KindIncremental, Stream: fmt.Sprintf("h%03d", i), Interval: 10 * time.Minute})
	}
	last := map[string]time.Time{}
	worst := map[byte]time.Duration{}
	now := t0
	for now.Before(t0.Add(2 * time.Hour)) {
		jobs := claim(t, s, now)
		if len(jobs) == 0 {
			t.Fatalf("at %v: nothing claimed", now.Sub(t0))
		}
		for _, j := range jobs {
			if prev, ok := last[j.Stream]; ok {
				worst[j.Stream[0]] = max(worst[j.Stream[0]], now.Sub(prev))
			}
			last[j.Stream] = now
		}
		now = now.Add(time.Second)
		for _, j := range jobs {
			if _, err := s.FinishAt(ctx, now, j, schedule.Result{}, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(last) != backfills+heads {
		t.Fatalf("%d of %d streams ran in two hours", len(last), backfills+heads)
	}
	// A round of the backfills is 1,000 s; the head work takes 100 s of
	// every 600.
	if w := worst['b']; w > 1300*time.Second {
		t.Errorf("a backfill waited %v between two runs; a round is about 1,200 s", w)
	}
	if w := worst['h']; w > 11*time.Minute {
		t.Errorf("an incremental job waited %v between two runs, every 10 minutes", w)
	}
	t.Logf("worst waits: backfill %v, incremental %v", worst['b'], worst['h'])
}
