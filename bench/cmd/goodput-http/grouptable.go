package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// isGroup reports whether the client named name is a pg client.
func isGroup(cls []client, name string) bool {
	i := slices.IndexFunc(cls, func(c client) bool { return c.name == name })
	return i >= 0 && cls[i].group != nil
}

// groupTable renders the pg clients' results: a line per row, client and
// run length, in table order, with what the processes asked of
// PostgreSQL and, for the kill cells, what happened after the kill; then
// the notes (the shared record around each kill, the failures).
func groupTable(rs []row, cls []client, results []result) string {
	var b, notes strings.Builder
	b.WriteString("examples/ohlcv processes sharing one provider through one PostgreSQL (one symbol each, -page 100)\n\n")
	b.WriteString("| provider policy | run | processes | goodput / refused [, bans] (t90) | work per process | statements /process/s: pages + leases + other | whole run | xacts /process/s | SIGKILL at half the run |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	n := 0
	for _, rw := range rs {
		for _, cl := range cls {
			for _, r := range results {
				if r.Row != rw.name || r.Client != cl.name {
					continue
				}
				procs := fmt.Sprint(cl.group.procs)
				if r.Kill != nil {
					procs += ", 1 killed"
				}
				if r.Failed {
					n++
					fmt.Fprintf(&b, "| %s | %s | %s | failed [%d] | | | | | |\n", rw.name, r.Run, procs, n)
					fmt.Fprintf(&notes, "[%d] %s, %s, %s: %s\n", n, rw.name, r.Run, r.Client, r.Note)
					continue
				}
				steady, whole, xacts := dbCells(r.DB)
				kill := "–"
				if k := r.Kill; k != nil {
					n++
					kill = k.cell() + fmt.Sprintf(" [%d]", n)
					fmt.Fprintf(&notes, "[%d] %s, %s, %s: shared record 1 s before the kill: %s; %s after: %s\n",
						n, rw.name, r.Run, r.Client, orNone(k.LeasesBefore), lease+time.Second, orNone(k.LeasesAfter))
				}
				fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
					rw.name, r.Run, procs, r.cell(), workCell(r.Work), steady, whole, xacts, kill)
			}
		}
	}
	b.WriteString("\nstatements: pg_stat_statements calls in the cell's database (each one round trip; BEGIN and COMMIT count), " +
		"from 5 s into the run to its end, per process and second: pages, the commits of the candles (4 a page: BEGIN, " +
		"fenced checkpoint, insert, COMMIT; they grow with the request rate); leases, the share renewals on provider_shares " +
		"(a read and a compare-and-swap write each); other, the rest (provider records, stream leases, gaps). " +
		"whole run: the same from the first process's start to the last one's exit (start-up and migrations included). " +
		"xacts: pg_stat_database xact_commit + xact_rollback over the whole run.\n")
	if notes.Len() > 0 {
		b.WriteString("\n" + notes.String())
	}
	return b.String()
}

// dbCells renders what the processes asked of PostgreSQL per process and
// second: the steady statements (of which lease renewals), the whole
// run's statements, and the whole run's transactions.
func dbCells(u *dbUse) (steady, whole, xacts string) {
	if u == nil || u.WholeSeconds <= 0 {
		return "?", "?", "?"
	}
	xacts = fmt.Sprintf("%.1f", float64(u.Whole.Xacts)/u.WholeSeconds)
	if !u.Statements {
		return "not counted", "not counted", xacts
	}
	return split(u.Steady, u.SteadySeconds), split(u.Whole, u.WholeSeconds), xacts
}

// split renders c per process-second as "all = pages + leases + other".
func split(c dbCount, s float64) string {
	pages := float64(pageStatements*c.Pages) / s
	leases := float64(c.Shares) / s
	all := float64(c.Statements) / s
	return fmt.Sprintf("%.1f = %.1f + %.1f + %.1f", all, pages, leases, all-pages-leases)
}

// workCell renders each process's part of the 200s: "33 34 33%".
func workCell(w []float64) string {
	if len(w) == 0 {
		return "–"
	}
	parts := make([]string, len(w))
	for i, x := range w {
		parts[i] = fmt.Sprintf("%.0f", 100*x)
	}
	return strings.Join(parts, " ") + "%"
}

// cell renders k: when, whether the process was collecting, the share of
// the limit served before and after, and the time until 90% again.
func (k killReport) cell() string {
	if k.At == 0 {
		return "not killed"
	}
	s := fmt.Sprintf("p%d at %.1fs", k.Proc+1, k.At.Seconds())
	switch {
	case !k.Running:
		s += " (had exited)"
	default:
		s += fmt.Sprintf(" (%d ok in the 2 s before", k.OKBefore)
		if k.Remote {
			s += ", as another host"
		}
		s += ")"
	}
	s += fmt.Sprintf(": %.0f%% of the limit in the 5 s before, %.0f%% from 3 s after; ", 100*k.Before, 100*k.After)
	if k.Recovered {
		return s + fmt.Sprintf("90%% in a second again after %.1fs", k.Recover.Seconds())
	}
	return s + "90% in a second never again"
}

// orNone returns s, or "unread" when it is empty.
func orNone(s string) string {
	if s == "" {
		return "unread"
	}
	return s
}
