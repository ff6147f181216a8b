package budget_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"pgregory.net/rapid"
)

// TestBanWithoutRetryAfterPauses is the regression for a 418 without
// Retry-After, which set no pause: each 10 s run sent 5 requests to the
// banned provider, stopped as `deadline`, saved nothing, and a restart
// called it again at once. Now the ban pauses the provider for BanPause
// (1 minute by default), the call stops as banned with Until, the calls
// that follow in the run stop the same way without a request, the pause is
// saved with its reason, and a restarted provider stops as banned too.
func TestBanWithoutRetryAfterPauses(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := &fakeRecords{}
		cfg := fast()
		cfg.MaxWait = time.Minute
		cfg.Records = store
		p := newLocal(t, cfg)
		start := time.Now()
		want := start.Add(time.Minute)
		run := newRun(t, budget.Envelope{Deadline: start.Add(10 * time.Second)})
		calls := 0
		banned := func(ctx context.Context) forage.Outcome {
			calls++
			return fromHeaders(418)(ctx)
		}
		for i := range 6 { // the stream re-runs within the run
			stop := stopOf(t, p.Do(context.Background(), run, banned))
			if stop.Reason != forage.ReasonBanned || !stop.Until.Equal(want) {
				t.Fatalf("call %d: %v (%s) until +%v, want banned until +1m", i, stop, stop.Reason, stop.Until.Sub(start))
			}
		}
		if calls != 1 {
			t.Fatalf("%d requests reached the banned provider, want 1", calls)
		}
		if got, why := store.get("test"), store.reason("test"); !got.Equal(want) || why != "banned" {
			t.Fatalf("saved pause %v (+%v), %q; want +1m, banned", got, got.Sub(start), why)
		}
		restarted := newLocal(t, cfg)
		run = newRun(t, budget.Envelope{Deadline: time.Now().Add(10 * time.Second)})
		stop := stopOf(t, restarted.Do(context.Background(), run, banned))
		if stop.Reason != forage.ReasonBanned || !stop.Until.Equal(want) || calls != 1 {
			t.Fatalf("after a restart: %v (%s) until +%v, %d requests; want banned until +1m, none sent", stop, stop.Reason, stop.Until.Sub(start), calls-1)
		}
	})
}

// TestBanPauseDoubles: each ban in a row without Retry-After pauses twice
// as long as the one before, up to MaxPause; a success ends the row.
func TestBanPauseDoubles(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p := newLocal(t, fast())
		var at time.Time // when the request was sent
		banned := func(context.Context) forage.Outcome {
			at = time.Now()
			return forage.Outcome{Status: 418}
		}
		want := []time.Duration{1, 2, 4, 8, 16, 32, 60, 60}
		for i, w := range want {
			stop := stopOf(t, p.Do(context.Background(), nil, banned))
			if got := stop.Until.Sub(at); stop.Reason != forage.ReasonBanned || got != w*time.Minute {
				t.Fatalf("ban %d: %s for %v, want banned for %v", i+1, stop.Reason, got, w*time.Minute)
			}
			time.Sleep(time.Until(stop.Until))
		}
		if err := p.Do(context.Background(), nil, status(200, 0)); err != nil {
			t.Fatalf("after the last ban: %v", err)
		}
		stop := stopOf(t, p.Do(context.Background(), nil, banned))
		if got := stop.Until.Sub(at); got != time.Minute {
			t.Fatalf("first ban after a success: %v, want 1m again", got)
		}
	})
}

// TestBanPauseConfig: BanPause sets the first ban's pause; a negative one,
// or one longer than MaxPause, is refused naming the field.
func TestBanPauseConfig(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		cfg := fast()
		cfg.BanPause = 5 * time.Minute
		p := newLocal(t, cfg)
		start := time.Now()
		stop := stopOf(t, p.Do(context.Background(), nil, status(418, 0)))
		if got := stop.Until.Sub(start); got != 5*time.Minute {
			t.Fatalf("ban with BanPause 5m: paused %v", got)
		}
	})
	for _, c := range []budget.Config{
		{BanPause: -time.Second},
		{BanPause: 2 * time.Hour},
		{BanPause: 2 * time.Minute, MaxPause: time.Minute},
	} {
		_, err := budget.NewLocal("p", c)
		if !errors.Is(err, budget.ErrInvalidConfig) || !strings.Contains(err.Error(), "Config.BanPause") {
			t.Errorf("NewLocal(BanPause %v, MaxPause %v) = %v, want ErrInvalidConfig naming Config.BanPause", c.BanPause, c.MaxPause, err)
		}
	}
}

// TestPropertyBanPause: whatever the answers, a 418 stops the call as
// banned until the provider's Retry-After when it gave one, or else until
// BanPause doubled for each ban since the last success, never past
// MaxPause; the store holds that pause as banned, a call refused during it
// says banned, a restarted provider too; once the ban is over a call
// refused by a 429's pause says throttled.
func TestPropertyBanPause(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		rapid.SyncTest(rt, func(rt *rapid.T) {
			store := checkpoint.NewMemoryStore(checkpoint.Config{})
			cfg := fast()
			cfg.BanPause = time.Duration(rapid.Int64Range(1, 600).Draw(rt, "banPauseSecs")) * time.Second
			cfg.MaxPause = cfg.BanPause + time.Duration(rapid.Int64Range(0, 7200).Draw(rt, "maxPauseExtraSecs"))*time.Second
			cfg.MaxWait = time.Duration(rapid.Int64Range(0, 600).Draw(rt, "maxWaitSecs")) * time.Second
			cfg.Records = store
			p := newLocal(rt, cfg)
			bans := 0
			steps := rapid.IntRange(1, 15).Draw(rt, "steps")
			for i := range steps {
				code := rapid.SampledFrom([]int{200, 418, 418, 429}).Draw(rt, "code")
				var ra time.Duration // a Retry-After pauses whatever the status: none on a 200
				if code != 200 {
					ra = time.Duration(rapid.SampledFrom([]int64{0, 0, 1, 30, 7200}).Draw(rt, "retryAfterSecs")) * time.Second
				}
				var at time.Time
				err := p.Do(context.Background(), nil, func(context.Context) forage.Outcome {
					at = time.Now()
					return forage.Outcome{Status: code, RetryAfter: ra}
				}, budget.CallOption{NoRetry: true})
				if code == 200 {
					if err != nil {
						rt.Fatalf("step %d: 200: %v", i, err)
					}
					bans = 0
					continue
				}
				stop := stopOf(rt, err)
				want, reason := at.Add(min(ra, cfg.MaxPause)), forage.ReasonThrottled
				if code == 418 {
					bans++
					reason = forage.ReasonBanned
					if ra == 0 {
						d := cfg.BanPause
						for range bans - 1 {
							d = min(2*d, cfg.MaxPause)
						}
						want = at.Add(d)
					}
				}
				if ra == 0 && code == 429 {
					time.Sleep(time.Duration(rapid.Int64Range(0, 5).Draw(rt, "idleSecs")) * time.Second)
					continue // no pause to check
				}
				if stop.Reason != reason || !stop.Until.Equal(want) {
					rt.Fatalf("step %d: %d with Retry-After %v after %d bans: %s until +%v, want %s until +%v",
						i, code, ra, bans, stop.Reason, stop.Until.Sub(at), reason, want.Sub(at))
				}
				rec, _, err := store.LoadRecord(context.Background(), "test")
				if saved, why := rec.PausedUntil, rec.PauseReason; err != nil || !saved.Equal(want) || why != reason {
					rt.Fatalf("step %d: store holds %v, %q, %v; want +%v, %s", i, saved.Sub(at), why, err, want.Sub(at), reason)
				}
				// A call refused by the pause (its deadline comes first) and
				// a restarted provider both name the pause's reason.
				ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
				refused := stopOf(rt, p.Do(ctx, nil, status(200, 0)))
				restarted := stopOf(rt, newLocal(rt, cfg).Do(ctx, nil, status(200, 0)))
				cancel()
				for who, s := range map[string]*budget.Error{"refused": refused, "restarted": restarted} {
					if s.Reason != reason || !s.Until.Equal(want) {
						rt.Fatalf("step %d: %s call: %s until +%v, want %s until +%v", i, who, s.Reason, s.Until.Sub(at), reason, want.Sub(at))
					}
				}
				time.Sleep(time.Until(want)) // the pause ends before the next step
			}
		})
	})
}
