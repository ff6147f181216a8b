package main

import (
	"fmt"
	"math"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/forage-go/forage/providertest"
)

// draws is how many rows the draw tests look at.
const draws = 1000

// TestDrawIsDeterministic checks row i is drawn from i and the seed alone:
// the same (i, seed) gives the same row whatever was drawn before, and
// another seed other rows.
func TestDrawIsDeterministic(t *testing.T) {
	t.Parallel()
	rs := randomRows(0, 50, 1)
	for i := 49; i >= 0; i-- { // in reverse: no state carried between draws
		if got := drawRow(i, 1); !reflect.DeepEqual(got, rs[i]) {
			t.Fatalf("row %d drawn alone: %+v, in the run of 50: %+v", i, got, rs[i])
		}
	}
	if got := randomRows(7, 1, 1)[0]; !reflect.DeepEqual(got, rs[7]) {
		t.Fatalf("-random 1 -random-from 7: %q, want %q", got.name, rs[7].name)
	}
	same := 0
	for i := range 50 {
		if reflect.DeepEqual(drawRow(i, 2), rs[i]) {
			same++
		}
	}
	if same > 0 {
		t.Fatalf("%d of 50 rows the same under seed 2 as under seed 1", same)
	}
}

// TestDrawRanges checks every drawn parameter over many rows: within its
// range, a valid server at 30 s and 120 s, and each kind drawn about as
// often as drawRow says (the draws are fixed, so the shares are too; the
// bounds leave a few standard deviations).
func TestDrawRanges(t *testing.T) {
	t.Parallel()
	kinds := map[string]int{}
	for i := range draws {
		rw := drawRow(i, 1)
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("row %d %q: %s", i, rw.name, fmt.Sprintf(format, args...))
		}
		for _, d := range []time.Duration{30 * time.Second, 120 * time.Second} {
			if _, err := providertest.New(rw.config(d, time.Now, 1, 0, 0)); err != nil {
				fail("at %v: %v", d, err)
			}
		}
		rate := rw.rate(0, 30*time.Second)
		switch l := rw.limit; {
		case rw.fixedWindow():
			kinds["fixed window"]++
			w := int(l.Window / time.Second)
			if !slices.Contains(drawnWindows, w) || l.Window%time.Second != 0 {
				fail("window %v not one of %v s", l.Window, drawnWindows)
			}
			if rw.halves && 15%w != 0 {
				fail("a window of %v that halves does not divide 15 s", l.Window)
			}
			// The count rounds rate × window: at a 1 s window, within 0.05/s
			// of the rate's range.
			if rate < 2-0.55 || rate > 60+0.55 || l.Count < 1 {
				fail("%d per %v is %.2f/s, out of [2, 60]", l.Count, l.Window, rate)
			}
		default:
			if rate < 2 || rate > 60 || math.Round(rate*10) != rate*10 {
				fail("rate %v/s out of [2, 60] or not in tenths", rate)
			}
			switch b := l.Burst; {
			case b < 1 || b > 25:
				fail("burst %d out of [1, 25]", b)
			case b == 1:
				kinds["burst 1"]++
			case b <= 5:
				kinds["burst 2-5"]++
			default:
				kinds["burst 6-25"]++
			}
		}
		if rate < 12 {
			kinds["under 12/s"]++
		}
		switch a := rw.answer; {
		case a.SlowDown:
			kinds["slow-down"]++
		case a.Status == http.StatusServiceUnavailable:
			kinds["503"]++
		case a.NoRetryAfter:
			kinds["bare 429"]++
		case a.Status == 0:
			kinds["429+retry-after"]++
		default:
			fail("answer %+v", a)
		}
		switch a := rw.answer; {
		case a.BanAfter == 5 && a.BanWindow == time.Minute && a.BanFor == 2*time.Minute:
			kinds["bans"]++
		case a.BanAfter != 0 || a.BanWindow != 0 || a.BanFor != 0:
			fail("ban %+v", a)
		}
		switch h := rw.headers; {
		case h.IETF && h.Binance:
			kinds["IETF + MBX"]++
		case h.IETF:
			kinds["IETF"]++
		case h != providertest.Headers{}:
			fail("headers %+v", h)
		}
		switch {
		case rw.faultRate == 0 && len(rw.faults) == 0:
		case (rw.faultRate != 0.05 && rw.faultRate != 0.10) || len(rw.faults) != 1 ||
			(rw.faults[0] != http.StatusBadGateway && rw.faults[0] != http.StatusServiceUnavailable):
			fail("faults %v at %v", rw.faults, rw.faultRate)
		default:
			kinds[fmt.Sprintf("faults %d", rw.faults[0])]++
		}
		if rw.halves {
			kinds["halves"]++
		}
		if rw.latency < time.Millisecond || rw.latency > 60*time.Millisecond || rw.jitter < 0 || rw.jitter > rw.latency/3 ||
			rw.latency%time.Millisecond != 0 || rw.jitter%time.Millisecond != 0 {
			fail("latency %v + %v: want 1-60 ms plus up to a third, in whole ms", rw.latency, rw.jitter)
		}
		cfg := rw.config(30*time.Second, time.Now, 1, time.Second, time.Second)
		if cfg.Latency != rw.latency || cfg.Jitter != rw.jitter {
			fail("the server's latency %v + %v, not the row's", cfg.Latency, cfg.Jitter)
		}
		if !rw.long || !rw.shared || rw.solo || rw.pgOnly {
			fail("long %v shared %v solo %v pgOnly %v: want long and shared only", rw.long, rw.shared, rw.solo, rw.pgOnly)
		}
	}
	// The share of each kind, as drawRow states it.
	want := map[string]float64{
		"fixed window": 1. / 6, "burst 1": 5. / 6 * (1./3 + 1./3/25), "burst 2-5": 5. / 6 * (1./3 + 1./3*4/25), "burst 6-25": 5. / 6 / 3 * 20 / 25,
		"under 12/s": 1./5 + 4./5*8/56,
		"bare 429":   1. / 4, "503": 1. / 10, "slow-down": 1. / 20, "429+retry-after": 12. / 20, "bans": 1. / 4 * 19 / 20,
		"IETF": 1. / 12, "IETF + MBX": 1. / 12, "faults 502": 1. / 12, "faults 503": 1. / 12, "halves": 1. / 10,
	}
	for k, p := range want {
		got := float64(kinds[k]) / draws
		sd := math.Sqrt(p * (1 - p) / draws)
		if kinds[k] == 0 || math.Abs(got-p) > 4*sd {
			t.Errorf("%s: %d of %d rows (%.3f), want about %.3f", k, kinds[k], draws, got, p)
		}
	}
}

// TestDrawnNames checks the names are unique, state every drawn
// parameter, and that -rows '#7:' picks row 7 alone.
func TestDrawnNames(t *testing.T) {
	t.Parallel()
	rs := randomRows(0, draws, 1)
	seen := map[string]bool{}
	for i, rw := range rs {
		if seen[rw.name] {
			t.Fatalf("row %d: duplicate name %q", i, rw.name)
		}
		seen[rw.name] = true
		want := []string{fmt.Sprintf("random #%d: ", i), fmt.Sprintf(", %d+%dms", rw.latency.Milliseconds(), rw.jitter.Milliseconds())}
		if rw.fixedWindow() {
			want = append(want, fmt.Sprintf("window %d/%v", rw.limit.Count, rw.limit.Window))
		} else {
			want = append(want, fmt.Sprintf("gcra %g/s burst %d", rw.limit.Rate, rw.limit.Burst))
		}
		if rw.answer.BanAfter > 0 {
			want = append(want, ", bans")
		}
		if rw.halves {
			want = append(want, ", halves mid-run")
		}
		if rw.faultRate > 0 {
			want = append(want, fmt.Sprintf(", +%g%% %d", 100*rw.faultRate, rw.faults[0]))
		}
		if rw.headers.IETF {
			want = append(want, ", IETF ")
		}
		for _, w := range want {
			if !strings.Contains(rw.name, w) {
				t.Fatalf("row %d: name %q lacks %q", i, rw.name, w)
			}
		}
		if got := drawnLabel(rw.name); got != fmt.Sprintf("#%d", i) {
			t.Fatalf("row %d: label %q", i, got)
		}
	}
	if n := drawRow(7, 1).name; !strings.HasPrefix(n, "random #7: ") {
		t.Fatalf("row 7 is named %q", n)
	}
	o, err := parseFlags([]string{"-random", "100", "-rows", "#7:", "-clients", "crawl"})
	if err != nil {
		t.Fatal(err)
	}
	if cells := plan(o, o.rowSet(), allClients("")); len(cells) != 1 || cells[0].row != 7 {
		t.Fatalf("-rows '#7:' planned %v, want row 7 alone", cells)
	}
}

// TestRandomFlags checks -random and -random-from: validated naming the
// flag, the default clients, -latency and -jitter refused beside them, and
// the plan.
func TestRandomFlags(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"-random", "-1"}, "-random"},
		{[]string{"-random", "501"}, "-random"},
		{[]string{"-random", "3", "-random-from", "-1"}, "-random-from"},
		{[]string{"-random", "3", "-random-from", "1000001"}, "-random-from"},
		{[]string{"-random-from", "3"}, "-random-from"},
		{[]string{"-random", "3", "-latency", "5ms"}, "-latency"},
		{[]string{"-random", "3", "-jitter", "5ms"}, "-jitter"},
	} {
		if _, err := parseFlags(c.args); err == nil || !strings.Contains(err.Error(), c.flag) {
			t.Fatalf("%v: got %v, want an error naming %s", c.args, err, c.flag)
		}
	}
	count := func(args ...string) int {
		t.Helper()
		o, err := parseFlags(args)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return len(plan(o, o.rowSet(), allClients("")))
	}
	if n := count("-random", "3", "-clients", "crawl"); n != 3 {
		t.Fatalf("-random 3 -clients crawl: %d cells, want 3", n)
	}
	if n := count("-random", "3"); n != 3*len(randomClients) {
		t.Fatalf("-random 3: %d cells, want 3 × %v", n, randomClients)
	}
	if n := count("-random", "3", "-dur", "30s,120s"); n != 2*3*len(randomClients) {
		t.Fatalf("-random 3 -dur 30s,120s: %d cells, want every row at both (the drawn rows are long)", n)
	}
	if n := count("-random", "3", "-clients", "crawl,aws,rate1x"); n != 9 {
		t.Fatalf("-random 3 with the peers: %d cells, want 9", n)
	}
	o, err := parseFlags([]string{"-random", "4", "-random-from", "10", "-seed", "9"})
	if err != nil {
		t.Fatal(err)
	}
	if rs := o.rowSet(); len(rs) != 4 || rs[0].name != drawRow(10, 9).name || rs[3].name != drawRow(13, 9).name {
		t.Fatalf("-random 4 -random-from 10 -seed 9: rows %q..%q", rs[0].name, rs[len(rs)-1].name)
	}
	if o, _ := parseFlags(nil); len(o.rowSet()) != len(rows()) || o.clients != nil {
		t.Fatal("without -random: not the fixed rows and every client")
	}
}

// TestAggregate checks the line per client and run: the order statistics,
// the mean refused share, the banned rows of those that ban, and failed
// cells counted apart.
func TestAggregate(t *testing.T) {
	t.Parallel()
	var rs []row
	for i := 0; len(rs) < 10; i++ { // ten rows, the first two that ban, the rest not
		rw := drawRow(i, 1)
		if bans := rw.answer.BanAfter > 0; bans == (len(rs) < 2) {
			rs = append(rs, rw)
		}
	}
	d := 30 * time.Second
	o := options{durs: []time.Duration{d}, workers: 8, random: 10}
	var results []result
	for k, rw := range rs {
		r := result{Row: rw.name, Client: "crawl", Run: d, Goodput: float64(k+1) / 10, RefusedShare: 0.01 * float64(k)}
		if k == 1 {
			r.Bans = 2
		}
		results = append(results, r)
	}
	results = append(results, result{Row: rs[0].name, Client: "ohlcv-3", Run: d, Failed: true, Note: "exit status 1"},
		result{Row: rs[1].name, Client: "ohlcv-3", Run: d, Goodput: 0.5, RefusedShare: 0.02})
	got := markdown(o, rs, allClients(""), results)
	// goodputs 0.1 .. 1.0: mean 55%, tenth (index 1) 20%, median (index
	// 5) 60%; refused 0 .. 9%: mean 4.5%.
	for _, want := range []string{
		"each drawn row's own latency",
		"| client | run | rows | goodput mean | tenth | median | refused mean | banned |",
		"| ohlcv-3 | 30s | 1 (1 failed) | 50.0% | 50.0% | 50.0% | 2.00% | 0 of 1 |",
		"| crawl | 30s | 10 | 55.0% | 20.0% | 60.0% | 4.50% | 1 of 2: " + drawnLabel(rs[1].name) + " |",
	} {
		if !strings.Contains(got, want) {
			t.Fatalf("lacks %q:\n%s", want, got)
		}
	}
	fixed := rows()[:1]
	plain := markdown(options{durs: o.durs, workers: 8, latency: defaultLatency, jitter: defaultJitter}, fixed, allClients(""), []result{{Row: fixed[0].name, Client: "crawl", Run: d}})
	if strings.Contains(plain, "at a glance") || !strings.Contains(plain, "3ms+4ms latency") {
		t.Fatalf("the fixed rows' table has the aggregate:\n%s", plain)
	}
}
