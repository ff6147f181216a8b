package main

import (
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/forage-go/forage/providertest"
)

const ms = time.Millisecond

// TestRowsAreValid checks every row makes a valid server at both standard
// run lengths and has a unique name.
func TestRowsAreValid(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for i, rw := range rows() {
		if seen[rw.name] {
			t.Fatalf("row %d: duplicate name %q", i, rw.name)
		}
		seen[rw.name] = true
		for _, d := range []time.Duration{30 * time.Second, 120 * time.Second} {
			if _, err := providertest.New(rw.config(d, time.Now, 1, defaultLatency, defaultJitter)); err != nil {
				t.Fatalf("row %d %q at %v: %v", i, rw.name, d, err)
			}
		}
	}
}

// TestServable pins the denominator of goodput: a GCRA's rate times the
// run, a fixed window's count pro-rated, the halving integrated, noise
// taken off.
func TestServable(t *testing.T) {
	t.Parallel()
	d := 30 * time.Second
	cases := []struct {
		rw   row
		want float64
	}{
		{row{limit: providertest.Limit{Rate: 17, Burst: 1}}, 510},
		{row{limit: providertest.Limit{Count: 600, Window: 30 * time.Second}}, 600},
		{row{limit: providertest.Limit{Count: 600, Window: 30 * time.Second}}, 600},
		{row{limit: providertest.Limit{Rate: 20, Burst: 1}, halves: true}, 20*15 + 10*15},
		{row{limit: providertest.Limit{Rate: 17, Burst: 1}, faultRate: 0.1}, 459},
	}
	for i, c := range cases {
		if got := c.rw.servable(d); math.Abs(got-c.want) > 1e-9 {
			t.Fatalf("case %d: servable %v, want %v", i, got, c.want)
		}
	}
	if got := cases[1].rw.servable(120 * time.Second); got != 2400 {
		t.Fatalf("fixed window over 120s: %v, want 2400 (four windows)", got)
	}
	half := cases[3].rw
	if half.rate(14999*ms, d) != 20 || half.rate(15*time.Second, d) != 10 {
		t.Fatal("the halving row's rate does not halve at half the run")
	}
}

// TestT90 steps through the sliding-second rule: the first t at which the
// successes in (t-1s, t] reach 90% of the limit, counted from the first
// request.
func TestT90(t *testing.T) {
	t.Parallel()
	every := func(from, to, step time.Duration) (out []time.Duration) {
		for x := from; x <= to; x += step {
			out = append(out, x)
		}
		return out
	}
	ten := func(time.Duration) float64 { return 10 }
	// 5/s until 2s, then 10/s from 2.1s: the second (1.7s, 2.7s] is the
	// first to hold 9 (1.8s and 2.0s, then 2.1s to 2.7s).
	ok := append(every(200*ms, 2000*ms, 200*ms), every(2100*ms, 5000*ms, 100*ms)...)
	got, reached := t90(ok, 50*ms, ten)
	if !reached || got != 2650*ms {
		t.Fatalf("t90 = %v %v, want 2.65s (2.7s - first request at 50ms)", got, reached)
	}
	if _, reached := t90(every(0, 10*time.Second, 200*ms), 0, ten); reached {
		t.Fatal("5/s against 10/s reached 90%")
	}
	if _, reached := t90(nil, 0, ten); reached {
		t.Fatal("no successes reached 90%")
	}
	// Exactly 9 in a second is enough (>= 0.9·L, not >).
	if got, reached := t90(every(100*ms, 900*ms, 100*ms), 0, ten); !reached || got != 900*ms {
		t.Fatalf("9 in the first second: t90 = %v %v, want 0.9s", got, reached)
	}
}

// TestSuccessesAndTrace checks only 200s answered within the run count,
// by their answer time, and that the trace buckets refusals apart.
func TestSuccessesAndTrace(t *testing.T) {
	t.Parallel()
	events := []event{
		{at: 0, done: 5 * ms, status: 200},
		{at: 10 * ms, done: 12 * ms, status: 429},
		{at: 900 * ms, done: 1100 * ms, status: 200},  // slowed down past the second
		{at: 1990 * ms, done: 2010 * ms, status: 200}, // answered after the run
		{at: 1500 * ms, done: 1501 * ms, status: 502},
	}
	ok := successes(events, 2*time.Second)
	if len(ok) != 2 || ok[0] != 5*ms || ok[1] != 1100*ms {
		t.Fatalf("successes %v, want [5ms 1.1s]", ok)
	}
	if first, _ := firstArrival(events[1:]); first != 10*ms {
		t.Fatalf("first arrival %v, want 10ms", first)
	}
	got := perSecond(events, 2*time.Second, func(e event) bool { return e.status == 429 })
	want := [][3]int{{1, 1, 0}, {1, 0, 1}}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("per second %v, want %v", got, want)
		}
	}
}

// TestPlan checks which cells run: everything at 30s, only what a long
// run adds at 120s, everything with -full, and the filters.
func TestPlan(t *testing.T) {
	t.Parallel()
	rs, cls := rows(), allClients("")
	count := func(o options) int {
		if o.rows == nil {
			o.rows = regexp.MustCompile("")
		}
		return len(plan(o, rs, cls))
	}
	long, fixed, shared, fast := 0, 0, 0, 0
	// The rows only the pg clients run against are in no other column.
	plain := slices.DeleteFunc(slices.Clone(rs), func(rw row) bool { return rw.pgOnly })
	for _, rw := range rs {
		if rw.shared {
			shared++
		}
	}
	for _, rw := range plain {
		if rw.long {
			long++
		}
		if rw.long && rw.solo {
			fast++ // and ohlcv-1
		}
		if rw.fixedWindow() {
			fixed++
		}
	}
	columns := 0 // the default table's columns: every client but the opt-in ones
	for _, c := range cls {
		if !c.optIn {
			columns++
		}
	}
	short := []time.Duration{30 * time.Second}
	both := []time.Duration{30 * time.Second, 120 * time.Second}
	if n := count(options{durs: short}); n != len(plain)*columns {
		t.Fatalf("30s: %d cells, want every one (%d)", n, len(plain)*columns)
	}
	if n := count(options{durs: both}); n != len(plain)*columns+2*long+fixed+fast {
		t.Fatalf("30s,120s: %d cells, want %d", n, len(plain)*columns+2*long+fixed+fast)
	}
	if n := count(options{durs: both, full: true}); n != 2*len(plain)*columns {
		t.Fatalf("-full: %d cells, want %d", n, 2*len(plain)*columns)
	}
	if n := count(options{durs: short, clients: []string{"rate0.9x", "rate0.95x"}}); n != 2*len(plain) {
		t.Fatalf("the opt-in jitter columns, named: %d cells, want %d", n, 2*len(plain))
	}
	if n := count(options{durs: both, clients: []string{"pg-3", "pg-8-kill"}}); n != 2*2*shared {
		t.Fatalf("pg clients: %d cells, want %d (the shared rows only, at every duration)", n, 2*2*shared)
	}
	if n := count(options{durs: short, clients: []string{"crawl"}, rows: regexp.MustCompile("noise|random")}); n != 4 {
		t.Fatalf("crawl on the noise rows: %d cells, want 4", n)
	}
	cells := plan(options{durs: both, rows: regexp.MustCompile("")}, rs, cls)
	if cells[0].run != 120*time.Second {
		t.Fatal("long runs are not planned first")
	}
	solo := slices.IndexFunc(cells, func(c cellPlan) bool { return rs[c.row].solo })
	if solo < 0 || slices.ContainsFunc(cells[solo:], func(c cellPlan) bool { return !rs[c.row].solo }) {
		t.Fatal("the solo rows' cells are not planned last, after every other")
	}
}

// TestParseFlags checks defaults and that bad values are refused naming
// the flag.
func TestParseFlags(t *testing.T) {
	t.Parallel()
	o, err := parseFlags(nil)
	if err != nil || len(o.durs) != 1 || o.durs[0] != 30*time.Second || o.parallel != 4 || o.workers != 8 || o.json {
		t.Fatalf("defaults: %+v %v", o, err)
	}
	for _, args := range [][]string{
		{"-dur", "30"}, {"-dur", "10ms"}, {"-clients", "curl"}, {"-parallel", "0"}, {"-rows", "("}, {"-workers", "-1"},
	} {
		if _, err := parseFlags(args); err == nil || !strings.Contains(err.Error(), args[0]) {
			t.Fatalf("%v: got %v, want an error naming %s", args, err, args[0])
		}
	}
}

// TestMarkdown checks the table: a line per row and run, a column per
// client that ran, dashes for cells not run, and failures as notes.
func TestMarkdown(t *testing.T) {
	t.Parallel()
	rs := rows()[:2]
	o := options{durs: []time.Duration{30 * time.Second, 120 * time.Second}, workers: 8}
	results := []result{
		{Row: rs[0].name, Client: "crawl", Run: 30 * time.Second, Goodput: 0.927, RefusedShare: 0.0007, T90: 2100 * ms, Reached: true},
		{Row: rs[0].name, Client: "crawl", Run: 120 * time.Second, Goodput: 0.031, RefusedShare: 0.0717, Bans: 3},
		{Row: rs[1].name, Client: "ohlcv-1", Run: 30 * time.Second, Failed: true, Note: "ohlcv: exit status 1"},
	}
	got := markdown(o, rs, allClients(""), results)
	for _, want := range []string{
		"| provider policy | run | ohlcv-1 | crawl |",
		"| " + rs[0].name + " | 30s | – | 92.7% / 0.07% (2.1s) |",
		"| " + rs[0].name + " | 2m0s | – | 3.1% / 7.17%, 3 bans (never) |",
		"| " + rs[1].name + " | 30s | failed [1] | – |",
		"[1] " + rs[1].name + ", 30s, ohlcv-1: ohlcv: exit status 1",
	} {
		if !strings.Contains(got, want) {
			t.Fatalf("table lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, rs[1].name+" | 2m0s") {
		t.Fatalf("a line with no cell was printed:\n%s", got)
	}
	if s := slug("gcra 17/s + 5% random 502"); s != "gcra-17-s-5-random-502" {
		t.Fatalf("slug %q", s)
	}
}

// TestHalvingFixedWindow checks a fixed window that halves halves its
// count, on the server as in the denominator (it halved nothing before:
// the schedule halved a fixed window's zero Rate).
func TestHalvingFixedWindow(t *testing.T) {
	t.Parallel()
	rw := row{limit: providertest.Limit{Count: 90, Window: 3 * time.Second}, halves: true}
	d := 30 * time.Second
	cfg := rw.config(d, time.Now, 1, 0, 0)
	if got := cfg.Schedule[d/2]; got != (providertest.Limit{Count: 45, Window: 3 * time.Second}) {
		t.Fatalf("the schedule at half the run: %+v, want 45 per 3s", got)
	}
	if got := rw.servable(d); got != 30*15+15*15 {
		t.Fatalf("servable %v, want %v", got, 30*15+15*15)
	}
}
