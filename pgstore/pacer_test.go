package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/forage-go/forage/gcra"
	"github.com/forage-go/forage/pgstore"
	"github.com/jackc/pgx/v5/pgxpool"
	"pgregory.net/rapid"
)

var pacerKeys atomic.Int64

// newPacer returns a pacer on a key no other test uses.
func newPacer(t fataler, s *pgstore.Store, cfg pgstore.PacerConfig) *pgstore.Pacer {
	t.Helper()
	p, err := s.NewPacer(fmt.Sprint("provider-", pacerKeys.Add(1)), cfg)
	if err != nil {
		t.Fatalf("NewPacer: %v", err)
	}
	return p
}

// TestPacerMatchesLimiter is the pacer's model test: random sequences of
// reservations, decisions, give-backs, rate changes and pauses, at
// explicit times, get exactly the answers a gcra.Limiter gives. So the
// shared row behaves as the in-process limiter does, including the SQL
// restatements of unreserve, pause and rescale, and rates round to the
// same interval.
func TestPacerMatchesLimiter(t *testing.T) {
	t.Parallel()
	s := newStore(t, nil)
	ctx := t.Context()
	rates := []float64{0.5, 1, 3, 10, 7.7, 1000, 1e6}
	rapid.Check(t, func(rt *rapid.T) {
		rate := rapid.SampledFrom(rates).Draw(rt, "rate")
		burst := rapid.IntRange(1, 5).Draw(rt, "burst")
		lim, err := gcra.New(gcra.Config{Rate: rate, Burst: burst})
		if err != nil {
			rt.Fatal(err)
		}
		p := newPacer(rt, s, pgstore.PacerConfig{Rate: rate, Burst: burst})
		now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
		steps := rapid.IntRange(1, 40).Draw(rt, "steps")
		for step := range steps {
			now = now.Add(time.Duration(rapid.OneOf(rapid.Just(int64(0)),
				rapid.Int64Range(0, int64(3*lim.Interval()))).Draw(rt, "advance")))
			n := rapid.IntRange(-1, burst+1).Draw(rt, "n")
			switch op := rapid.IntRange(0, 4).Draw(rt, "op"); op {
			case 0:
				want := lim.ReserveNAt(now, n)
				got, err := p.ReserveNAt(ctx, now, n)
				if err != nil || got != want {
					rt.Fatalf("step %d: ReserveNAt(%d): pacer %v (%v), limiter %v", step, n, got, err, want)
				}
			case 1:
				want := lim.AllowNAt(now, n)
				got, err := p.AllowNAt(ctx, now, n)
				if err != nil || got != want {
					rt.Fatalf("step %d: AllowNAt(%d): pacer %+v (%v), limiter %+v", step, n, got, err, want)
				}
			case 2:
				lim.UnreserveNAt(now, n)
				if err := p.UnreserveNAt(ctx, now, n); err != nil {
					rt.Fatalf("step %d: UnreserveNAt: %v", step, err)
				}
			case 3:
				r := rapid.SampledFrom(rates).Draw(rt, "new rate")
				if err := lim.SetRateAt(now, r); err != nil {
					rt.Fatal(err)
				}
				if err := p.ForceRateAt(ctx, now, r); err != nil {
					rt.Fatalf("step %d: ForceRateAt(%v): %v", step, r, err)
				}
				st, err := p.State(ctx)
				if err != nil || st.Interval != lim.Interval() {
					rt.Fatalf("step %d: ForceRateAt(%v): interval %v (%v), limiter %v", step, r, st.Interval, err, lim.Interval())
				}
			case 4:
				until := now.Add(time.Duration(rapid.Int64Range(-int64(time.Second), int64(time.Minute)).Draw(rt, "pause")))
				lim.PauseUntil(until)
				if err := p.PauseUntilAt(ctx, until); err != nil {
					rt.Fatalf("step %d: PauseUntilAt: %v", step, err)
				}
			}
		}
	})
}

// TestPacerSharedAcrossProcesses: two stores on two pools (two processes)
// and many goroutines admit on one key at one instant; together they get
// exactly Burst admissions, and reservations get every slot exactly once.
func TestPacerSharedAcrossProcesses(t *testing.T) {
	t.Parallel()
	a := newStore(t, nil)
	pool, err := pgxpool.New(t.Context(), testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	b, err := pgstore.New(pool, pgstore.Config{Schema: a.Schema()})
	if err != nil {
		t.Fatal(err)
	}
	const burst, callers, calls = 7, 8, 5
	cfg := pgstore.PacerConfig{Rate: 10, Burst: burst}
	pa := newPacer(t, a, cfg)
	pb, err := b.NewPacer(pa.Key(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	var (
		allowed atomic.Int64
		mu      sync.Mutex
		waits   []time.Duration
		wg      sync.WaitGroup
	)
	for g := range callers {
		p := []*pgstore.Pacer{pa, pb}[g%2]
		wg.Go(func() {
			for range calls {
				r, err := p.AllowNAt(t.Context(), at, 1)
				if err != nil {
					t.Error(err)
					return
				}
				if r.Allowed {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got := allowed.Load(); got != burst {
		t.Fatalf("%d admissions at one instant across two processes, want the burst %d", got, burst)
	}
	later := at.Add(time.Hour) // idle again: a full burst
	for g := range callers {
		p := []*pgstore.Pacer{pa, pb}[g%2]
		wg.Go(func() {
			for range calls {
				w, err := p.ReserveNAt(t.Context(), later, 1)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				waits = append(waits, w)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(waits)
	iv := 100 * time.Millisecond
	for k, w := range waits {
		if want := time.Duration(max(0, k-burst+1)) * iv; w != want {
			t.Fatalf("reservation %d of %d waits %v, want %v: slots %v", k, len(waits), w, want, waits)
		}
	}
}

// TestPacerWaitN covers the blocking path on the database clock: an
// immediate admission, a short real wait, costs that can never conform,
// a deadline too near (the slot is given back), and a cancellation while
// waiting for a slot too far ahead to book (nothing was booked).
func TestPacerWaitN(t *testing.T) {
	t.Parallel()
	s := newStore(t, nil)
	ctx := t.Context()

	fast := newPacer(t, s, pgstore.PacerConfig{Rate: 200, Burst: 1})
	for i := range 3 { // the 2nd and 3rd wait about 5ms each
		if err := fast.WaitN(ctx, 1); err != nil {
			t.Fatalf("WaitN %d: %v", i, err)
		}
	}

	slow := newPacer(t, s, pgstore.PacerConfig{Rate: 1.0 / 3600, Burst: 2})
	if err := slow.WaitN(ctx, 0); err != nil {
		t.Fatalf("WaitN(0): %v", err)
	}
	for _, n := range []int{-1, 3} {
		if err := slow.WaitN(ctx, n); !errors.Is(err, gcra.ErrInvalidCost) {
			t.Fatalf("WaitN(%d): %v, want ErrInvalidCost", n, err)
		}
	}
	if err := slow.WaitN(ctx, 2); err != nil { // the whole burst
		t.Fatalf("WaitN(2): %v", err)
	}
	backlog := func() time.Duration {
		t.Helper()
		st, err := slow.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.Backlog
	}
	if b := backlog(); b <= time.Hour || b > 2*time.Hour {
		t.Fatalf("backlog %v after booking the burst, want in (1h, 2h]", b)
	}

	short, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err := slow.WaitN(short, 1)
	if !errors.Is(err, gcra.ErrWouldExceedDeadline) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitN with a deadline before the slot: %v", err)
	}
	if b := backlog(); b > 2*time.Hour {
		t.Fatalf("backlog %v after a refused wait: the slot was not given back", b)
	}

	// A slot an hour away is not booked while its caller waits (BookAhead):
	// cancelling the wait leaves the row as it was.
	waiting, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- slow.WaitN(waiting, 1) }()
	time.Sleep(50 * time.Millisecond) // the goroutine is waiting, not booking
	if b := backlog(); b > 2*time.Hour {
		t.Fatalf("backlog %v while a caller waits an hour away: it booked its slot ahead", b)
	}
	select {
	case err := <-done:
		t.Fatalf("WaitN returned %v before it was cancelled", err)
	default:
	}
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled WaitN: %v, want context.Canceled", err)
	}
	if b := backlog(); b > 2*time.Hour {
		t.Fatalf("backlog %v after a cancelled wait: the slot was not given back", b)
	}
}

// TestPacerPauseUntil: a pause reaches every process and holds the first
// request until it ends; a shorter pause changes nothing.
func TestPacerPauseUntil(t *testing.T) {
	t.Parallel()
	s := newStore(t, nil)
	p := newPacer(t, s, pgstore.PacerConfig{Rate: 100, Burst: 10})
	p.PauseUntil(time.Now().Add(time.Hour))
	other, err := s.NewPacer(p.Key(), pgstore.PacerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	p.PauseUntil(time.Now().Add(time.Minute)) // shorter: no effect
	w, err := other.ReserveN(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if w < time.Hour-time.Minute || w > time.Hour+time.Second {
		t.Fatalf("first request after a 1h pause waits %v, want about 1h", w)
	}
}

// TestPacerRejectsBadRates: rates gcra refuses, and forced rates whose
// interval overflows with the shared row's burst, are ErrInvalidRate and
// leave the rate unchanged; a cut that would overflow stops at the slowest
// rate the row can hold.
func TestPacerRejectsBadRates(t *testing.T) {
	t.Parallel()
	s := newStore(t, nil)
	ctx := t.Context()
	p := newPacer(t, s, pgstore.PacerConfig{Rate: 4, Burst: 1000})
	if err := p.SetRate(5); err != nil { // the first proposal creates the row
		t.Fatal(err)
	}
	narrow, err := s.NewPacer(p.Key(), pgstore.PacerConfig{Burst: 1}) // agrees locally
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []float64{0, -1, math.NaN(), math.Inf(1), 2e9} {
		if err := p.SetRate(r); !errors.Is(err, gcra.ErrInvalidRate) {
			t.Errorf("SetRate(%v): %v, want ErrInvalidRate", r, err)
		}
		if err := p.ForceRate(ctx, r); !errors.Is(err, gcra.ErrInvalidRate) {
			t.Errorf("ForceRate(%v): %v, want ErrInvalidRate", r, err)
		}
	}
	if err := narrow.ForceRate(ctx, 1e-9); !errors.Is(err, gcra.ErrInvalidRate) {
		t.Errorf("ForceRate overflowing the shared burst: %v, want ErrInvalidRate", err)
	}
	if r, err := p.Rate(ctx); err != nil || r != 5 {
		t.Fatalf("rate after refused rates: %v (%v), want 5", r, err)
	}
	if err := p.SetRate(5e-9); err != nil { // a cut by 1e9: far past what burst 1000 allows
		t.Fatal(err)
	}
	st, err := p.State(ctx)
	if want := time.Duration(math.MaxInt64 / 1000); err != nil || st.Interval != want || st.Burst != 1000 {
		t.Fatalf("state after an overflowing cut: %+v (%v), want interval %v, burst 1000", st, err, want)
	}
}

func TestNewPacerRejectsBadConfig(t *testing.T) {
	t.Parallel()
	s, err := pgstore.New(&pgxpool.Pool{}, pgstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		cfg   pgstore.PacerConfig
		field string
	}{
		{"negative rate", pgstore.PacerConfig{Rate: -1}, "Rate"},
		{"NaN rate", pgstore.PacerConfig{Rate: math.NaN()}, "Rate"},
		{"rate above 1e9", pgstore.PacerConfig{Rate: 2e9}, "Rate"},
		{"negative burst", pgstore.PacerConfig{Burst: -1}, "Burst"},
		{"overflowing burst", pgstore.PacerConfig{Rate: 1e-9, Burst: 1 << 40}, "Burst"},
		{"negative timeout", pgstore.PacerConfig{Timeout: -time.Second}, "Timeout"},
		{"negative cool-off", pgstore.PacerConfig{HoldAfterCut: -time.Second}, "HoldAfterCut"},
		{"growth 1", pgstore.PacerConfig{MaxGrowth: 1}, "MaxGrowth"},
		{"growth NaN", pgstore.PacerConfig{MaxGrowth: math.NaN()}, "MaxGrowth"},
		{"growth 1e4", pgstore.PacerConfig{MaxGrowth: 1e4}, "MaxGrowth"},
	} {
		_, err := s.NewPacer("k", tc.cfg)
		want := "pgstore: PacerConfig." + tc.field + " must "
		if !errors.Is(err, pgstore.ErrInvalidConfig) || err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: %v, want ErrInvalidConfig starting %q", tc.name, err, want)
		}
	}
	if _, err := s.NewPacer("", pgstore.PacerConfig{}); !errors.Is(err, pgstore.ErrInvalidConfig) {
		t.Errorf("empty key: %v, want ErrInvalidConfig", err)
	}
}
