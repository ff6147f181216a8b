package schedule_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/schedule"
	"github.com/forage-go/forage/slice"
)

// refusing is a cursor feed whose provider answers 401 to every request
// from its first (a wrong key) on; fixed, from the request after it.
type refusing struct {
	calls   atomic.Int64
	fixedAt int64 // the first call that is answered; 0: never
	tokens
}

func (f *refusing) Fetch(ctx context.Context, s slice.Slice) (slice.Page[int64], forage.Outcome) {
	if n := f.calls.Add(1); f.fixedAt == 0 || n < f.fixedAt {
		return slice.Page[int64]{}, forage.Outcome{Status: 401, Err: errors.New("HTTP 401: invalid API key")}
	}
	return f.tokens.Fetch(ctx, s)
}

// TestBackfilledStopsWaitingForStreamsTurnedAwayForGood: when every stream
// not done is turned away for good, run after run (a wrong key), Backfilled
// returns at once an error that names them and wraps the provider's
// permanent answer; it waited out the whole deadline (a one-shot command
// with a wrong key hung for its three-minute backstop). A stream the
// provider turns away once, then serves, is waited for; and so is one
// still collecting beside one turned away.
func TestBackfilledStopsWaitingForStreamsTurnedAwayForGood(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		fixedAt int64 // see refusing
		others  bool  // a second stream, served, beside it
		wantErr bool
	}{
		{name: "wrong key", wantErr: true},
		{name: "wrong key beside a stream served", others: true, wantErr: true},
		{name: "a token that expired once", fixedAt: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				s, _ := streamSched(t, schedule.Config{}, budget.RegistryConfig{})
				bad := &refusing{fixedAt: tc.fixedAt, tokens: tokens{n: 300, page: 50}}
				if err := schedule.AddStream(t.Context(), s, schedule.Stream[int64]{Name: "items", Provider: "p", Backfill: bad, Sink: &kept{}}); err != nil {
					t.Fatal(err)
				}
				good := &kept{}
				if tc.others {
					if err := schedule.AddStream(t.Context(), s, schedule.Stream[int64]{Name: "others", Provider: "q", Backfill: tokens{n: 3000, page: 50}, Sink: good}); err != nil {
						t.Fatal(err)
					}
				}
				stop := start(t, s)
				defer stop()
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
				defer cancel()
				began := time.Now()
				err := s.Backfilled(ctx)
				took := time.Since(began)
				if !tc.wantErr {
					if err != nil {
						t.Fatalf("Backfilled = %v after %v; want nil", err, took)
					}
					return
				}
				var be *budget.Error
				if !errors.As(err, &be) || be.Reason != forage.ReasonPermanent || be.Status != 401 || errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Backfilled = %v after %v; want the provider's 401, not the deadline", err, took)
				}
				if n := strings.Count(err.Error(), be.Error()); n != 1 {
					t.Fatalf("Backfilled = %q: the provider's answer %q said %d times; want once", err, be, n)
				}
				if took > time.Minute {
					t.Fatalf("Backfilled returned after %v; want within a minute of the second refusal", took)
				}
				if tc.others {
					if h := good.holes(0, 3000); len(h) > 0 {
						t.Fatalf("Backfilled returned with %d of the served stream's 3000 items missing: it must wait for a stream still collecting", len(h))
					}
				}
			})
		})
	}
}
