package budget_test

// The untuned table: providers of kinds the short table has no rows for
// (concurrency limits, sliding logs, per-minute windows, big buckets with a
// slow refill, high and load-dependent latency, every form of "come back
// later", limits that change, weighted requests), each driven through
// budget.Provider (zero Config) from several workers under testing/synctest.
// It is where forage meets the providers it was not tuned on; rows that
// regressed or were mended are held by the tests at the end of this file.
//
// Run: make untuned (UNTUNED=1 go test -run TestUntuned -v ./budget)
//   UNTUNED_ROW=<substring>  only matching rows
//   UNTUNED_SEEDS=n          seeds per row (default 5)
//   UNTUNED_RUN=30s,2m       run lengths (default both)
//   UNTUNED_TRACE=1          per-second trace (ok/s, refused/s, rate, ceiling, in flight) of the first seed
//   UNTUNED_LOG=1            the provider's slog records of the first seed
//   UNTUNED_VERBOSE=1        one line per seed
//   UNTUNED_SEED_FROM=k      seeds k+1.. (trace a bad seed)

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
)

// raForm is how a refusal tells the client when to come back.
type raForm int

const (
	raSeconds   raForm = iota // Retry-After: ceil(wait) seconds, at least 1
	raDate                    // Retry-After: HTTP-date (ceil to the second), with a Date header
	raZero                    // Retry-After: 0
	raNone                    // nothing
	raEpoch                   // X-RateLimit-Reset: Unix seconds of the reset, nothing else
	raDay                     // Retry-After: 86400 (a day), whatever the wait
	raEpochFull               // X-RateLimit-Remaining: 0 and X-RateLimit-Reset: Unix seconds (GitHub style)
)

// verdict is a provider's decision on one arriving request.
type verdict struct {
	ok      bool
	status  int           // refusal status (429, 503); 0 = 429
	wait    time.Duration // until the request would conform (for Retry-After)
	latency time.Duration // service time when ok (0 = the row's base latency)
	release func(at time.Duration)
}

// uProvider is one simulated provider: decide runs under mu at each
// arrival. All times are offsets from the start of the run.
type uProvider struct {
	mu      sync.Mutex
	rng     *rand.Rand
	start   time.Time
	decide  func(at time.Duration, w int) verdict
	form    raForm
	baseLat time.Duration
	jitLat  time.Duration

	requests, ok, refused int
	units                 int // weight admitted
	oks, refs             []time.Duration
	early                 int           // requests that arrived after the client got a refusal and before its Retry-After ended
	raEnd                 time.Duration // latest pause end told
	raSeen                time.Duration // when the client received the refusal that told it
	inflight, maxInflight int
}

func (p *uProvider) now() time.Duration { return time.Since(p.start) }

// attempt returns the attempt func of a call of weight w.
func (p *uProvider) attempt(w int) func(ctx context.Context) forage.Outcome {
	return func(ctx context.Context) forage.Outcome {
		p.mu.Lock()
		at := p.now()
		p.requests++
		p.inflight++
		p.maxInflight = max(p.maxInflight, p.inflight)
		if at >= p.raSeen && at < p.raEnd {
			p.early++
		}
		v := p.decide(at, w)
		lat := p.baseLat
		if p.jitLat > 0 {
			lat += time.Duration(p.rng.Int64N(int64(p.jitLat)))
		}
		if v.ok && v.latency > 0 {
			lat = v.latency
		}
		if !v.ok {
			lat = p.baseLat / 2 // refusals are cheap
		}
		var h http.Header
		status := http.StatusOK
		if !v.ok {
			status = v.status
			if status == 0 {
				status = http.StatusTooManyRequests
			}
			h = p.refusalHeaders(v.wait, at)
			// what the client is told to honour, as it will read it
			if d, ok := toldPause(p.form, v.wait); ok {
				if end := at + lat + d; end > p.raEnd {
					p.raEnd, p.raSeen = end, at+lat
				}
			}
		}
		p.mu.Unlock()
		t := time.NewTimer(lat)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			p.mu.Lock()
			p.inflight--
			p.mu.Unlock()
			if v.release != nil {
				v.release(p.now())
			}
			return forage.FromHTTP(nil, ctx.Err())
		}
		p.mu.Lock()
		p.inflight--
		if v.ok {
			p.ok++
			p.units += w
			p.oks = append(p.oks, p.now())
		} else {
			p.refused++
			p.refs = append(p.refs, p.now())
		}
		p.mu.Unlock()
		if v.release != nil {
			v.release(p.now())
		}
		resp := &http.Response{StatusCode: status, Header: h, Body: http.NoBody}
		if resp.Header == nil {
			resp.Header = http.Header{}
		}
		out := forage.FromHTTP(resp, nil)
		_, _ = io.Copy(io.Discard, resp.Body)
		return out
	}
}

// toldPause is the pause a refusal of form f asks for, as a client reads it.
func toldPause(f raForm, wait time.Duration) (time.Duration, bool) {
	switch f {
	case raSeconds, raDate:
		return max(time.Second, ceilSecond(wait)), true
	case raEpoch, raEpochFull:
		return wait, true
	case raDay:
		return 24 * time.Hour, true
	}
	return 0, false
}

func ceilSecond(d time.Duration) time.Duration {
	return (d + time.Second - 1) / time.Second * time.Second
}

func (p *uProvider) refusalHeaders(wait, at time.Duration) http.Header {
	h := http.Header{}
	now := p.start.Add(at)
	switch p.form {
	case raSeconds:
		h.Set("Retry-After", strconv.Itoa(int(max(time.Second, ceilSecond(wait))/time.Second)))
	case raDate:
		h.Set("Date", now.UTC().Format(http.TimeFormat))
		// the date a wait of ceil seconds from the Date header's second ends
		end := now.Truncate(time.Second).Add(max(time.Second, ceilSecond(wait)))
		if end.Before(now.Add(wait)) {
			end = end.Add(time.Second)
		}
		h.Set("Retry-After", end.UTC().Format(http.TimeFormat))
	case raZero:
		h.Set("Retry-After", "0")
	case raEpoch:
		// The provider's clock runs 25 years ahead of synctest's (which
		// starts in 2000), and says so in Date: FromHTTP reads it as skew.
		theirs := now.AddDate(25, 0, 0)
		h.Set("Date", theirs.UTC().Format(http.TimeFormat))
		end := theirs.Add(wait)
		h.Set("X-RateLimit-Reset", strconv.FormatInt(int64(math.Ceil(float64(end.UnixNano())/1e9)), 10))
	case raDay:
		h.Set("Retry-After", "86400")
	case raEpochFull:
		theirs := now.AddDate(25, 0, 0)
		h.Set("Date", theirs.UTC().Format(http.TimeFormat))
		end := theirs.Add(wait)
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("X-RateLimit-Reset", strconv.FormatInt(int64(math.Ceil(float64(end.UnixNano())/1e9)), 10))
	}
	return h
}

// --- provider policies ---

// gcraPolicy: rate r/s, burst b (a token bucket of depth b refilled at r).
func gcraPolicy(r func(at time.Duration) float64, b int) func(at time.Duration, w int) verdict {
	var tat time.Duration
	return func(at time.Duration, w int) verdict {
		iv := time.Duration(1e9 / r(at))
		tau := time.Duration(b) * iv
		next := max(tat, at) + time.Duration(w)*iv
		if next-at <= tau {
			tat = next
			return verdict{ok: true}
		}
		return verdict{wait: next - at - tau}
	}
}

// slidingLog: at most n requests admitted in any rolling window.
func slidingLog(n int, window time.Duration) func(at time.Duration, w int) verdict {
	var log []time.Duration
	return func(at time.Duration, w int) verdict {
		i := 0
		for i < len(log) && log[i] <= at-window {
			i++
		}
		log = log[i:]
		if len(log) < n {
			log = append(log, at)
			return verdict{ok: true}
		}
		return verdict{wait: log[0] + window - at}
	}
}

// fixedWindow: n per window, aligned to the run's start.
func fixedWindow(n int, window time.Duration) func(at time.Duration, w int) verdict {
	idx, count := int64(-1), 0
	return func(at time.Duration, w int) verdict {
		if i := int64(at / window); i != idx {
			idx, count = i, 0
		}
		if count < n {
			count++
			return verdict{ok: true}
		}
		return verdict{wait: time.Duration(idx+1)*window - at}
	}
}

// concurrencyLimit: at most n requests in service at once, each served in
// lat (+ up to jit); more are refused with status.
func concurrencyLimit(p *uProvider, n int, status int) func(at time.Duration, w int) verdict {
	busy := 0
	return func(at time.Duration, w int) verdict {
		if busy >= n {
			return verdict{status: status, wait: p.baseLat}
		}
		busy++
		return verdict{ok: true, release: func(time.Duration) { p.mu.Lock(); busy--; p.mu.Unlock() }}
	}
}

// queueServer: one FIFO server of capacity c/s; a request's latency is the
// base plus its wait in the queue; past depth queued requests it answers
// 503 at once.
func queueServer(p *uProvider, c float64, depth int) func(at time.Duration, w int) verdict {
	var free time.Duration // when the server is next free
	svc := time.Duration(1e9 / c)
	return func(at time.Duration, w int) verdict {
		q := int(max(0, free-at) / svc)
		if q >= depth {
			return verdict{status: http.StatusServiceUnavailable}
		}
		begin := max(free, at)
		free = begin + svc
		return verdict{ok: true, latency: free - at + p.baseLat}
	}
}

// --- rows ---

type uRow struct {
	name    string
	workers int
	lat     time.Duration // base latency
	jit     time.Duration
	form    raForm
	weights bool // each call weighs 1..10 (uniform), passed as a budget.CallOption Weight
	make    func(p *uProvider) func(at time.Duration, w int) verdict
	// capacity is what the provider could serve in d (requests, or units
	// with weights).
	capacity func(d time.Duration) float64
	// full is the rate the provider could serve at the end (for t90).
	full float64
	// t90From, when set, measures t90 from it (a limit that changes).
	t90From time.Duration
}

func rateConst(r float64) func(time.Duration) float64 {
	return func(time.Duration) float64 { return r }
}

func windowCap(n int, w time.Duration) func(time.Duration) float64 {
	return func(d time.Duration) float64 { return float64(n) * math.Ceil(float64(d)/float64(w)) }
}

func rateCap(r float64) func(time.Duration) float64 {
	return func(d time.Duration) float64 { return r * d.Seconds() }
}

// periodic: hi/s for 10 s, lo/s for 10 s, repeating.
func periodic(hi, lo float64) func(time.Duration) float64 {
	return func(at time.Duration) float64 {
		if int64(at/(10*time.Second))%2 == 0 {
			return hi
		}
		return lo
	}
}

func integrate(r func(time.Duration) float64) func(time.Duration) float64 {
	return func(d time.Duration) float64 {
		s := 0.0
		for t := time.Duration(0); t < d; t += 10 * time.Millisecond {
			s += r(t) * 0.01
		}
		return s
	}
}

func untunedRows() []uRow {
	lat, jit := 20*time.Millisecond, 10*time.Millisecond
	g := func(name string, r float64, b int, form raForm, workers int) uRow {
		return uRow{name: name, workers: workers, lat: lat, jit: jit, form: form,
			make:     func(*uProvider) func(time.Duration, int) verdict { return gcraPolicy(rateConst(r), b) },
			capacity: func(d time.Duration) float64 { return float64(b) + r*d.Seconds() }, full: r}
	}
	conc := func(n, workers int, l time.Duration, status int, form raForm) uRow {
		return uRow{name: fmt.Sprintf("concurrency %d, %d workers, %v, %d", n, workers, l, status), workers: workers, lat: l, form: form,
			make:     func(p *uProvider) func(time.Duration, int) verdict { return concurrencyLimit(p, n, status) },
			capacity: rateCap(float64(n) / l.Seconds()), full: float64(n) / l.Seconds()}
	}
	slogRow := func(n int, w time.Duration, form raForm) uRow {
		return uRow{name: fmt.Sprintf("sliding log %d/%v, %s", n, w, formName(form)), workers: 8, lat: lat, jit: jit, form: form,
			make:     func(*uProvider) func(time.Duration, int) verdict { return slidingLog(n, w) },
			capacity: windowCap(n, w), full: float64(n) / w.Seconds()}
	}
	rising := func(name string, lo, hi float64, at time.Duration, b int) uRow {
		r := func(t time.Duration) float64 {
			if t < at {
				return lo
			}
			return hi
		}
		return uRow{name: name, workers: 8, lat: lat, jit: jit, form: raSeconds, t90From: at,
			make:     func(*uProvider) func(time.Duration, int) verdict { return gcraPolicy(r, b) },
			capacity: integrate(r), full: hi}
	}
	win := func(n int, w time.Duration, form raForm) uRow {
		return uRow{name: fmt.Sprintf("fixed %d/%v, %s", n, w, formName(form)), workers: 8, lat: lat, jit: jit, form: form,
			make:     func(*uProvider) func(time.Duration, int) verdict { return fixedWindow(n, w) },
			capacity: windowCap(n, w), full: float64(n) / w.Seconds()}
	}
	rows := []uRow{
		// baseline, as the short table's row
		g("baseline gcra 17/s b1, RA", 17, 1, raSeconds, 3),
		conc(4, 8, 100*time.Millisecond, 429, raNone),
		conc(4, 16, 100*time.Millisecond, 503, raNone),
		conc(8, 32, 200*time.Millisecond, 429, raNone),
		conc(8, 32, 200*time.Millisecond, 429, raSeconds),
		slogRow(20, time.Second, raNone),
		slogRow(100, 10*time.Second, raNone),
		slogRow(600, time.Minute, raNone),
		slogRow(100, 10*time.Second, raSeconds),
		{name: "fixed 600/min, RA to window end", workers: 8, lat: lat, jit: jit, form: raSeconds,
			make:     func(*uProvider) func(time.Duration, int) verdict { return fixedWindow(600, time.Minute) },
			capacity: windowCap(600, time.Minute), full: 10},
		{name: "fixed 120/min, RA to window end", workers: 8, lat: lat, jit: jit, form: raSeconds,
			make:     func(*uProvider) func(time.Duration, int) verdict { return fixedWindow(120, time.Minute) },
			capacity: windowCap(120, time.Minute), full: 2},
		g("bucket 500 burst, 2/s refill, RA", 2, 500, raSeconds, 8),
		g("bucket 100 burst, 5/s refill, RA", 5, 100, raSeconds, 8),
		g("bucket 1000 burst, 1/s refill, RA", 1, 1000, raSeconds, 8),
		g("bucket 40 burst, 2/s refill, RA (a leaky bucket)", 2, 40, raSeconds, 4),
		{name: "gcra 40/s b5, 1s latency, 64 workers", workers: 64, lat: time.Second, jit: 200 * time.Millisecond, form: raSeconds,
			make:     func(*uProvider) func(time.Duration, int) verdict { return gcraPolicy(rateConst(40), 5) },
			capacity: rateCap(40), full: 40},
		{name: "gcra 100/s b10, 500ms latency, 64 workers", workers: 64, lat: 500 * time.Millisecond, jit: 100 * time.Millisecond, form: raSeconds,
			make:     func(*uProvider) func(time.Duration, int) verdict { return gcraPolicy(rateConst(100), 10) },
			capacity: rateCap(100), full: 100},
		{name: "gcra 20/s b1, 2s latency, 64 workers", workers: 64, lat: 2 * time.Second, jit: 300 * time.Millisecond, form: raSeconds,
			make:     func(*uProvider) func(time.Duration, int) verdict { return gcraPolicy(rateConst(20), 1) },
			capacity: rateCap(20), full: 20},
		{name: "queue 30/s, 503 past depth 10, 16 workers", workers: 16, lat: lat, form: raNone,
			make:     func(p *uProvider) func(time.Duration, int) verdict { return queueServer(p, 30, 10) },
			capacity: rateCap(30), full: 30},
		{name: "queue 30/s, 503 past depth 50, 64 workers", workers: 64, lat: lat, form: raNone,
			make:     func(p *uProvider) func(time.Duration, int) verdict { return queueServer(p, 30, 50) },
			capacity: rateCap(30), full: 30},
		g("gcra 17/s b1, RA as HTTP-date", 17, 1, raDate, 3),
		g("gcra 17/s b1, RA 0", 17, 1, raZero, 3),
		g("gcra 17/s b1, no RA", 17, 1, raNone, 3),
		g("gcra 17/s b1, X-RateLimit-Reset epoch only", 17, 1, raEpoch, 3),
		g("gcra 17/s b1, RA 1 day", 17, 1, raDay, 3),
		{name: "periodic 20/s 10s, 5/s 10s, RA", workers: 8, lat: lat, jit: jit, form: raSeconds,
			make:     func(*uProvider) func(time.Duration, int) verdict { return gcraPolicy(periodic(20, 5), 1) },
			capacity: integrate(periodic(20, 5)), full: 12.5},
		rising("rising 10/s -> 40/s at 15s, RA", 10, 40, 15*time.Second, 1),
		rising("rising 10/s -> 40/s at 60s, RA", 10, 40, 60*time.Second, 1),
		rising("rising 10/s -> 20/s at 60s, RA", 10, 20, 60*time.Second, 1),
		rising("rising 10/s b10 -> 40/s b10 at 60s, RA", 10, 40, 60*time.Second, 10),
		win(600, time.Minute, raNone),
		win(24, 2*time.Second, raNone),
		win(44, time.Second, raNone),
		win(95, 5*time.Second, raNone),
		win(600, time.Minute, raDate),
		win(600, time.Minute, raZero),
		win(600, time.Minute, raEpoch),
		win(600, time.Minute, raEpochFull),
		slogRow(600, time.Minute, raSeconds),
		{name: "weighted 1-10, 100 units/s b100, RA", workers: 8, lat: lat, jit: jit, form: raSeconds, weights: true,
			make:     func(*uProvider) func(time.Duration, int) verdict { return gcraPolicy(rateConst(100), 100) },
			capacity: rateCap(100), full: 100},
		{name: "weighted 1-10, 6000 units/min window, RA", workers: 8, lat: lat, jit: jit, form: raSeconds, weights: true,
			make: func(*uProvider) func(time.Duration, int) verdict {
				idx, used := int64(-1), 0
				return func(at time.Duration, w int) verdict {
					if i := int64(at / time.Minute); i != idx {
						idx, used = i, 0
					}
					if used+w <= 6000 {
						used += w
						return verdict{ok: true}
					}
					return verdict{wait: time.Duration(idx+1)*time.Minute - at}
				}
			},
			capacity: windowCap(6000, time.Minute), full: 100},
		{name: "weighted 1-10, 100 units/s b10, RA", workers: 8, lat: lat, jit: jit, form: raSeconds, weights: true,
			make:     func(*uProvider) func(time.Duration, int) verdict { return gcraPolicy(rateConst(100), 10) },
			capacity: rateCap(100), full: 100},
	}
	return rows
}

func formName(f raForm) string {
	return [...]string{"RA", "RA date", "RA 0", "no RA", "epoch reset", "RA 1 day", "remaining 0 + epoch reset"}[f]
}

type uResult struct {
	goodput, refused float64
	maxRefMin        int // most refusals in any rolling 60 s (a 5/min ban provider bans at 5)
	early            int
	t90              time.Duration
	rate, ceiling    float64
	maxInflight      int
}

func runUntuned(t *testing.T, row uRow, d time.Duration, seed uint64, trace bool) uResult {
	var res uResult
	synctest.Test(t, func(t *testing.T) {
		p := &uProvider{rng: rand.New(rand.NewPCG(seed, 99)), start: time.Now(), form: row.form, baseLat: row.lat, jitLat: row.jit}
		p.decide = row.make(p)
		var cfg budget.Config
		if trace && os.Getenv("UNTUNED_LOG") != "" {
			cfg.Logger = traceLogger(slog.LevelDebug)
		}
		pv, err := budget.NewLocal("sim", cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		wrng := rand.New(rand.NewPCG(seed, 7))
		var wmu sync.Mutex
		var tr strings.Builder
		var twg sync.WaitGroup
		defer twg.Wait()
		if trace && os.Getenv("UNTUNED_TRACE") != "" {
			twg.Go(func() {
				lastOK, lastRef := 0, 0
				for i := 1; ; i++ {
					select {
					case <-ctx.Done():
						return
					case <-time.After(time.Second):
					}
					s := pv.Snapshot()
					p.mu.Lock()
					fmt.Fprintf(&tr, "t=%3ds ok/s %4d ref/s %3d rate %7.2f ceil %7.2f phase %-10s inflight %d\n", i, p.ok-lastOK, p.refused-lastRef, s.Rate, s.Ceiling, s.Phase, p.inflight)
					lastOK, lastRef = p.ok, p.refused
					p.mu.Unlock()
				}
			})
		}
		var wg sync.WaitGroup
		for range row.workers {
			wg.Go(func() {
				for ctx.Err() == nil {
					w := 1
					var opts []budget.CallOption
					if row.weights {
						wmu.Lock()
						w = 1 + wrng.IntN(10)
						wmu.Unlock()
						opts = append(opts, budget.CallOption{Weight: w})
					}
					err := pv.Do(ctx, nil, p.attempt(w), opts...)
					if r, _ := budget.ReasonOf(err); r == forage.ReasonCanceled {
						return
					}
					var stop *budget.Error
					if asBudgetError(err, &stop) && stop.Until.After(time.Now()) {
						select {
						case <-time.After(time.Until(stop.Until)):
						case <-ctx.Done():
						}
					}
				}
			})
		}
		wg.Wait()
		s := pv.Snapshot()
		p.mu.Lock()
		defer p.mu.Unlock()
		served := float64(p.ok)
		if row.weights {
			served = float64(p.units)
		}
		res = uResult{
			goodput:     served / row.capacity(d),
			refused:     float64(p.refused) / float64(max(p.requests, 1)),
			early:       p.early,
			t90:         t90After(p.oks, row.t90From, 0.9*min(row.full, float64(row.workers)/row.lat.Seconds())),
			rate:        s.Rate,
			ceiling:     s.Ceiling,
			maxInflight: p.maxInflight,
		}
		if row.weights {
			res.t90 = -1 // not meaningful in requests
		}
		lo := 0
		for hi, r := range p.refs {
			for p.refs[lo] <= r-time.Minute {
				lo++
			}
			res.maxRefMin = max(res.maxRefMin, hi-lo+1)
		}
		if tr.Len() > 0 {
			fmt.Fprintf(os.Stderr, "--- %s, %v, seed %d\n%s", row.name, d, seed, tr.String())
		}
	})
	return res
}

func t90After(oks []time.Duration, from time.Duration, n float64) time.Duration {
	i := sort.Search(len(oks), func(i int) bool { return oks[i] > from })
	if i >= len(oks) {
		return -1
	}
	t := firstSustained(oks[i:], n)
	if t < 0 {
		return -1
	}
	return t - from
}

func asBudgetError(err error, target **budget.Error) bool {
	for err != nil {
		if e, ok := err.(*budget.Error); ok {
			*target = e
			return true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func TestUntuned(t *testing.T) {
	if os.Getenv("UNTUNED") == "" {
		t.Skip("a measurement: make untuned (UNTUNED=1)")
	}
	seeds, _ := strconv.Atoi(os.Getenv("UNTUNED_SEEDS"))
	if seeds == 0 {
		seeds = 5
	}
	runs := []time.Duration{30 * time.Second, 2 * time.Minute}
	if v := os.Getenv("UNTUNED_RUN"); v != "" {
		runs = nil
		for _, f := range strings.Split(v, ",") {
			d, err := time.ParseDuration(f)
			if err != nil {
				t.Fatal(err)
			}
			runs = append(runs, d)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-46s %4s %8s %8s %8s %6s %6s %6s %8s %8s %5s\n", "scenario", "run", "goodput", "(min)", "refused", "ref/m", "early", "t90", "rate", "ceiling", "infl")
	for _, row := range untunedRows() {
		if only := os.Getenv("UNTUNED_ROW"); only != "" && !strings.Contains(row.name, only) {
			continue
		}
		for _, d := range runs {
			var gp, rf, t9, rt, ce []float64
			var refMin, early, infl []float64
			from, _ := strconv.ParseUint(os.Getenv("UNTUNED_SEED_FROM"), 10, 64)
			for s := range uint64(seeds) {
				r := runUntuned(t, row, d, from+s+1, s == 0)
				if os.Getenv("UNTUNED_VERBOSE") != "" {
					fmt.Fprintf(os.Stderr, "%s %v seed %d: goodput %.1f%% refused %.2f%% ref/min %d rate %.2f ceil %.2f\n", row.name, d, from+s+1, 100*r.goodput, 100*r.refused, r.maxRefMin, r.rate, r.ceiling)
				}
				gp = append(gp, r.goodput)
				rf = append(rf, r.refused)
				refMin = append(refMin, float64(r.maxRefMin))
				early = append(early, float64(r.early))
				if r.t90 < 0 {
					r.t90 = d
				}
				t9 = append(t9, r.t90.Seconds())
				rt = append(rt, r.rate)
				ce = append(ce, r.ceiling)
				infl = append(infl, float64(r.maxInflight))
			}
			fmt.Fprintf(&b, "%-46s %4v %7.1f%% %7.1f%% %7.2f%% %6.0f %6.0f %6.1f %8.2f %8.2f %5.0f\n", row.name, d, 100*median(gp), 100*slices.Min(gp), 100*median(rf),
				slices.Max(refMin), slices.Max(early), median(t9), median(rt), median(ce), median(infl))
		}
	}
	t.Log(b.String())
}

// untunedRow returns the row of the untuned table named name.
func untunedRow(t *testing.T, name string) uRow {
	t.Helper()
	for _, r := range untunedRows() {
		if r.name == name {
			return r
		}
	}
	t.Fatalf("no untuned row %q", name)
	return uRow{}
}

// TestAWindowSpentWithoutRetryAfterIsSpentAgainWhenItReopens: a per-minute
// window spent with no Retry-After (none, or 0) cuts the rate at each
// refused request, down to its least; when the window reopens the climb
// starts again. It stayed off for a minute after the reopening (50% of
// such a provider over two minutes; 94% now): the demand meter counted
// the slots before each request at the rate before the cut that spaced
// it, so the caller seemed to use half of what it was given.
func TestAWindowSpentWithoutRetryAfterIsSpentAgainWhenItReopens(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"fixed 600/1m0s, no RA", "fixed 600/1m0s, RA 0", "sliding log 600/1m0s, no RA"} {
		for seed := range uint64(2) {
			if r := runUntuned(t, untunedRow(t, name), 2*time.Minute, seed+1, false); r.goodput < 0.85 {
				t.Errorf("%s, seed %d: goodput %.1f%% over 2m, want >= 85%% (rate %.2f/s at the end)", name, seed+1, 100*r.goodput, r.rate)
			}
		}
	}
}

// TestARefusalThatNamesOnlyItsResetIsHonoured: a 429 that gives
// X-RateLimit-Reset (a Unix time) and nothing else is a pause until that
// reset, as a Retry-After is: no request reaches the provider before it.
// The reset was dropped without a Remaining beside it, and 21 requests a
// run went out early to a spent per-minute window.
func TestARefusalThatNamesOnlyItsResetIsHonoured(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"fixed 600/1m0s, epoch reset", "gcra 17/s b1, X-RateLimit-Reset epoch only"} {
		if r := runUntuned(t, untunedRow(t, name), 2*time.Minute, 1, false); r.early > 0 || r.goodput < 0.9 {
			t.Errorf("%s: %d requests before the reset, goodput %.1f%%; want 0, >= 90%%", name, r.early, 100*r.goodput)
		}
	}
}

// TestAnEpisodeStillInFlightIsNotWhatTheProviderDelivered: at a latency
// comparable to an episode (a server 200 ms to 1 s away, or one that
// queues), the successes answered so far over the whole episode are not
// what the provider delivered: most answers are on their way. Read so, a
// 30/s server that queues was held at 7.6/s (60% of it over two minutes),
// and a 40/s provider a second away at 11/s in one run in five (29%).
func TestAnEpisodeStillInFlightIsNotWhatTheProviderDelivered(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		seeds uint64
	}{{"queue 30/s, 503 past depth 10, 16 workers", 2}, {"gcra 40/s b5, 1s latency, 64 workers", 5}} {
		for seed := range tc.seeds {
			if r := runUntuned(t, untunedRow(t, tc.name), 2*time.Minute, seed+1, false); r.goodput < 0.85 {
				t.Errorf("%s, seed %d: goodput %.1f%% over 2m, want >= 85%% (rate %.2f/s at the end)", tc.name, seed+1, 100*r.goodput, r.rate)
			}
		}
	}
}

// TestALimitThatRoseIsFound: a provider whose limit rises fourfold a
// minute into the run, with or without an allowance, is found within
// about a minute of the rise, when the refusals that found the old limit
// have aged out: over five minutes the collector gets 65% or more of
// what it could serve (46–52% before: the climb back to the ceiling took
// a whole cycle after the refusal budget's hold, and the probe above a
// confirmed ceiling needed two more to reach the new limit).
func TestALimitThatRoseIsFound(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"rising 10/s -> 40/s at 60s, RA", "rising 10/s b10 -> 40/s b10 at 60s, RA"} {
		if r := runUntuned(t, untunedRow(t, name), 5*time.Minute, 1, false); r.goodput < 0.65 || r.maxRefMin > 4 {
			t.Errorf("%s: goodput %.1f%% over 5m, %d refused in a minute at most; want >= 65%%, <= 4 (rate %.2f/s at the end)", name, 100*r.goodput, r.maxRefMin, r.rate)
		}
	}
}

// TestAQueueThatShedsIsNotReadAsArrivalJitter: a host that queues what it
// cannot serve at once (30/s) and answers 503 past a depth of 50, with 64
// workers: the probe above the ceiling fills the queue, and the 503s come
// at once while the requests queued before them are answered seconds
// later. What the host admitted between the first refusal and the fourth
// counts the requests answered by then, over the span up to a latency
// before the fourth, and the latencies' spread over the queue's wait is
// not arrival jitter: read as the span to the fourth refused request,
// plus twice that spread as jitter, the host's 30/s read as 7.8/s, and the
// ban guard held 64 workers there for a minute (78% of the host over five
// minutes; 95-99% now, as the trajectory goes: one more refusal at the
// host's 30/s, cut for as any overshoot is, costs 4 points). A 503 that comes back before a success of a request
// sent after the last cut could have is no sign of a limit far under the
// refused rate, but that rate was refused: with the ceiling kept, the
// climb back drew the next, each halving the rate, 68 refused in a minute
// (now 10 or fewer).
func TestAQueueThatShedsIsNotReadAsArrivalJitter(t *testing.T) {
	t.Parallel()
	if r := runUntuned(t, untunedRow(t, "queue 30/s, 503 past depth 50, 64 workers"), 5*time.Minute, 1, false); r.goodput < 0.94 || r.maxRefMin > 10 {
		t.Errorf("goodput %.1f%% over 5m, %d refused in a minute at most; want >= 94%%, <= 10 (rate %.2f/s at the end)", 100*r.goodput, r.maxRefMin, r.rate)
	}
}
