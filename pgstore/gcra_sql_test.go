package pgstore_test

import (
	"math"
	"testing"
	"time"

	"github.com/forage-go/forage/gcra"
	"pgregory.net/rapid"
)

// gcraArgs are the arguments of gcra.Decide and gcra.Reserve.
type gcraArgs struct {
	tat, now, iv int64
	burst, n     int
}

// drawGCRAArgs draws arguments of two kinds: realistic ones (a backlog
// near the tolerance, costs around the burst) where the decisions are
// interesting, and arbitrary int64s where only saturation matters.
func drawGCRAArgs(t *rapid.T) gcraArgs {
	if rapid.Bool().Draw(t, "arbitrary") {
		return gcraArgs{
			tat:   rapid.Int64().Draw(t, "tat"),
			now:   rapid.Int64().Draw(t, "now"),
			iv:    rapid.Int64().Draw(t, "interval"),
			burst: rapid.Int().Draw(t, "burst"),
			n:     rapid.Int().Draw(t, "n"),
		}
	}
	const lim = int64(1) << 62
	iv := rapid.Int64Range(1, int64(time.Hour)).Draw(t, "interval")
	burst := rapid.IntRange(1, 1000).Draw(t, "burst")
	now := rapid.Int64Range(-lim, lim).Draw(t, "now")
	tat := rapid.OneOf(rapid.Just(int64(math.MinInt64)),
		rapid.Int64Range(now-2*int64(burst)*iv, now+3*int64(burst)*iv)).Draw(t, "tat")
	n := rapid.IntRange(-1, burst+1).Draw(t, "n")
	return gcraArgs{tat: tat, now: now, iv: iv, burst: burst, n: n}
}

// TestSQLReserveIsGCRAReserve: the SQL gcra_reserve makes exactly the
// decision of gcra.Reserve, saturation included.
func TestSQLReserveIsGCRAReserve(t *testing.T) {
	t.Parallel()
	s := newStore(t, nil)
	fn := `"` + s.Schema() + `".gcra_reserve`
	rapid.Check(t, func(rt *rapid.T) {
		a := drawGCRAArgs(rt)
		wantTAT, wantWait := gcra.Reserve(a.tat, a.now, a.iv, a.burst, a.n)
		var gotTAT, gotWait int64
		err := s.Pool().QueryRow(t.Context(), `SELECT new_tat, wait FROM `+fn+`($1, $2, $3, $4, $5)`,
			a.tat, a.now, a.iv, a.burst, a.n).Scan(&gotTAT, &gotWait)
		if err != nil {
			rt.Fatalf("%+v: %v", a, err)
		}
		if gotTAT != wantTAT || time.Duration(gotWait) != wantWait {
			rt.Fatalf("%+v: SQL (tat %d, wait %d), gcra.Reserve (tat %d, wait %d)", a, gotTAT, gotWait, wantTAT, wantWait)
		}
	})
}

// TestSQLDecideIsGCRADecide: the SQL gcra_decide returns exactly the TAT
// and the Result of gcra.Decide.
func TestSQLDecideIsGCRADecide(t *testing.T) {
	t.Parallel()
	s := newStore(t, nil)
	fn := `"` + s.Schema() + `".gcra_decide`
	rapid.Check(t, func(rt *rapid.T) {
		a := drawGCRAArgs(rt)
		wantTAT, want := gcra.Decide(a.tat, a.now, a.iv, a.burst, a.n)
		var (
			gotTAT, remaining int64
			got               gcra.Result
		)
		err := s.Pool().QueryRow(t.Context(),
			`SELECT new_tat, allowed, remaining, retry_after, reset_after FROM `+fn+`($1, $2, $3, $4, $5)`,
			a.tat, a.now, a.iv, a.burst, a.n).Scan(&gotTAT, &got.Allowed, &remaining, &got.RetryAfter, &got.ResetAfter)
		if err != nil {
			rt.Fatalf("%+v: %v", a, err)
		}
		got.Remaining = int(remaining)
		if gotTAT != wantTAT || got != want {
			rt.Fatalf("%+v: SQL tat %d %+v, gcra.Decide tat %d %+v", a, gotTAT, got, wantTAT, want)
		}
	})
}
