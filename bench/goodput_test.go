package bench_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/bench/internal/clients"
	"github.com/forage-go/forage/internal/goodput"
	"github.com/forage-go/forage/providertest"
)

// The peer simulation: the rows and the setup of budget's TestGoodput (a
// Binance-like 50 req/s limit the clients are not told, 40ms latency plus up
// to 20ms of jitter, 8 workers, five simulated minutes per policy under
// testing/synctest), with one column per client. Goodput is the successful
// requests over what the true limit allowed; refused is the requests the
// provider refused (429, 503, 418) over the requests sent.

const (
	// peerRun is the simulated length of each cell.
	peerRun = 5 * time.Minute
	// peerRate is the true limit, requests/s.
	peerRate = 50
	// peerLatency is the provider's latency; jitter adds up to half of it.
	peerLatency = 40 * time.Millisecond
	// peerWorkers is the number of workers each client runs.
	peerWorkers = 8
	// peerURL is what every worker requests: one candle, weight 1. The
	// in-memory transport serves any host.
	peerURL = "http://sim/api/v3/klines?symbol=BTCUSDT&interval=1m&limit=1"
)

// client is one column: a way of calling the provider.
type client struct {
	id   string // the subtest's name
	name string // the column's header
	// run is the client, called inside the synctest bubble, so every clock
	// and timer it makes is fake.
	run clients.Func
}

// cell is one client's result against one policy.
type cell struct {
	goodput  float64 // successful requests / what the true limit allowed
	refused  float64 // refused requests / requests sent
	bans     int64
	requests int64
}

// ok reports whether c meets forage's targets: goodput >= 90%, at most 1% of
// requests refused, never banned.
func (c cell) ok() bool { return c.goodput >= 0.90 && c.refused <= 0.01 && c.bans == 0 }

// String renders c for the table: "92.7% / 0.07%", with the bans if any.
func (c cell) String() string {
	s := fmt.Sprintf("%.1f%% / %.2f%%", 100*c.goodput, 100*c.refused)
	if c.bans > 0 {
		s += fmt.Sprintf(", %d bans", c.bans)
	}
	return s
}

// measure runs cl against a fresh server for pol over peerRun of simulated
// time and returns the cell.
func measure(t *testing.T, pol goodput.Scenario, cl client) cell {
	t.Helper()
	var c cell
	synctest.Test(t, func(t *testing.T) {
		srv, err := providertest.New(pol.Config)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), peerRun)
		defer cancel()
		cl.run(ctx, srv.Client().Transport, peerURL, peerWorkers)
		st := srv.Stats()
		allowed := pol.Allowed(peerRun)
		c = cell{
			goodput:  float64(st.OK) / allowed,
			refused:  float64(st.Throttled+st.Unavailable+st.Banned) / float64(max(st.Requests, 1)),
			bans:     st.Bans,
			requests: st.Requests,
		}
	})
	return c
}

// table renders the cells as a Markdown table, rows = policies, columns =
// clients, ready to paste into the README.
func table(pols []goodput.Scenario, cls []client, cells [][]cell) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\ngoodput / refused, %d req/s true limit, %v+%v latency, %d workers, %v per cell\n\n",
		peerRate, peerLatency, peerLatency/2, peerWorkers, peerRun)
	fmt.Fprintf(&b, "| %-30s |", "provider policy")
	for _, cl := range cls {
		fmt.Fprintf(&b, " %-22s |", cl.name)
	}
	fmt.Fprintf(&b, "\n|%s|", strings.Repeat("-", 32))
	for range cls {
		fmt.Fprintf(&b, "%s|", strings.Repeat("-", 24))
	}
	for i, pol := range pols {
		fmt.Fprintf(&b, "\n| %-30s |", pol.Name)
		for j := range cls {
			fmt.Fprintf(&b, " %-22s |", cells[i][j])
		}
	}
	b.WriteString("\n")
	return b.String()
}

// TestPeers measures every client against every policy and prints the table
// (run with -v). Only forage's column, the first, is held to the targets of
// budget's TestGoodput; the peers' columns are a measurement.
func TestPeers(t *testing.T) {
	t.Parallel()
	pols, cls := goodput.Scenarios(peerRate, peerLatency, peerRun), peerClients()
	cells := make([][]cell, len(pols))
	for i := range cells {
		cells[i] = make([]cell, len(cls))
	}
	t.Run("cells", func(t *testing.T) {
		for i, pol := range pols {
			for j, cl := range cls {
				t.Run(pol.Name+" "+cl.id, func(t *testing.T) {
					t.Parallel()
					cells[i][j] = measure(t, pol, cl)
				})
			}
		}
	})
	t.Log(table(pols, cls, cells))
	for i, pol := range pols {
		if c := cells[i][0]; !c.ok() {
			t.Errorf("%s, %s: goodput %.1f%%, refused %.2f%%, bans %d; want >= 90%%, <= 1%%, 0",
				cls[0].name, pol.Name, 100*c.goodput, 100*c.refused, c.bans)
		}
	}
}
