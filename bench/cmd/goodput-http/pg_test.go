package main

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/forage-go/forage/providertest"
)

// TestWithDatabase checks a cell's DSN names its own database, in a URL
// or a key=value string.
func TestWithDatabase(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "postgres://postgres@127.0.0.1:5432/cell_1?sslmode=disable"},
		{"postgresql://u@h", "postgresql://u@h/cell_1"},
		{"host=db dbname=market", "host=db dbname=market dbname=cell_1"},
	} {
		if got, err := withDatabase(c.in, "cell_1"); err != nil || got != c.want {
			t.Fatalf("withDatabase(%q) = %q %v, want %q", c.in, got, err, c.want)
		}
	}
}

// TestWork checks each process's part of the 200s answered within the
// run, by its symbol; other answers and symbols count for no process.
func TestWork(t *testing.T) {
	t.Parallel()
	events := []event{
		{done: 1 * ms, status: 200, sym: 0},
		{done: 2 * ms, status: 200, sym: 1},
		{done: 3 * ms, status: 200, sym: 1},
		{done: 4 * ms, status: 429, sym: 0},
		{done: 5 * ms, status: 200, sym: -1},
		{done: 2 * time.Second, status: 200, sym: 0}, // after the run
	}
	got := work(events, time.Second, 2)
	if len(got) != 2 || got[0] != 0.25 || got[1] != 0.5 {
		t.Fatalf("work %v, want [0.25 0.5]", got)
	}
	if symbolIndex("BTCUSDT") != 0 || symbolIndex("NOPE") != -1 || len(symbols) < 8 {
		t.Fatal("symbols: BTCUSDT first, unknown -1, at least 8 for pg-8")
	}
}

// TestKillMeasure checks the share of the limit served before and after
// a kill and the time until 90% again.
func TestKillMeasure(t *testing.T) {
	t.Parallel()
	rw := row{limit: providertest.Limit{Rate: 10, Burst: 1}}
	var ok []time.Duration
	for x := 100 * ms; x <= 20*time.Second; x += 100 * ms { // 10/s
		if x > 10*time.Second && x < 12*time.Second && (x/(100*ms))%2 == 0 {
			continue // 5/s for 2 s after the kill
		}
		ok = append(ok, x)
	}
	k := &killReport{At: 10 * time.Second}
	k.measure(rw, ok, 20*time.Second)
	if math.Abs(k.Before-1) > 0.01 || math.Abs(k.After-1) > 0.01 {
		t.Fatalf("before %v after %v, want 1 and 1", k.Before, k.After)
	}
	if !k.Recovered || k.Recover < 2*time.Second || k.Recover > 3*time.Second {
		t.Fatalf("recover %v %v, want between 2s and 3s", k.Recover, k.Recovered)
	}
}

// TestGroupTable checks the pg clients' table: statements per process and
// second split into pages, leases and the rest, work per process, the kill
// and its note.
func TestGroupTable(t *testing.T) {
	t.Parallel()
	rs, cls := rows(), allClients("")
	rw := rs[0]
	u := &dbUse{Statements: true, SteadySeconds: 10, WholeSeconds: 20,
		Steady: dbCount{Statements: 100, Shares: 20, Pages: 15},
		Whole:  dbCount{Xacts: 60, Statements: 300, Shares: 40, Pages: 30}}
	results := []result{
		{Row: rw.name, Client: "pg-3", Run: 30 * time.Second, Procs: 3, Goodput: 0.95, Work: []float64{0.33, 0.34, 0.33}, DB: u},
		{Row: rw.name, Client: "pg-3-kill", Run: 30 * time.Second, Procs: 3, Goodput: 0.9, DB: u,
			Kill: &killReport{Proc: 2, At: 15 * time.Second, Running: true, OKBefore: 20, Before: 0.95, After: 0.97, Recover: 1500 * ms, Recovered: true, LeasesBefore: "rate 17.0/s, 3 leases"}},
	}
	got := markdown(options{durs: []time.Duration{30 * time.Second}}, rs, cls, results)
	for _, want := range []string{
		"| " + rw.name + " | 30s | 3 | 95.0% / 0.00% (never) | 33 34 33% | 10.0 = 6.0 + 2.0 + 2.0 | 15.0 = 6.0 + 2.0 + 7.0 | 3.0 | – |",
		"| 3, 1 killed |",
		"p3 at 15.0s (20 ok in the 2 s before): 95% of the limit in the 5 s before, 97% from 3 s after; 90% in a second again after 1.5s [1]",
		"[1] " + rw.name + ", 30s, pg-3-kill: shared record 1 s before the kill: rate 17.0/s, 3 leases; 4s after: unread",
	} {
		if !strings.Contains(got, want) {
			t.Fatalf("table lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "| provider policy | run | ohlcv-1") {
		t.Fatalf("the clients' matrix printed with only pg results:\n%s", got)
	}
}
