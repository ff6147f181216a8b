package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// cell renders res for the table: "92.7% / 0.07% (2.1s)", with the bans
// if any ("3.1% / 7.17%, 3 bans (never)"), or "failed".
func (res result) cell() string {
	if res.Failed {
		return "failed"
	}
	s := fmt.Sprintf("%.1f%% / %.2f%%", 100*res.Goodput, 100*res.RefusedShare)
	switch {
	case res.Bans == 1:
		s += ", 1 ban"
	case res.Bans > 1:
		s += fmt.Sprintf(", %d bans", res.Bans)
	}
	if res.Reached {
		return s + fmt.Sprintf(" (%.1fs)", res.T90.Seconds())
	}
	return s + " (never)"
}

// markdown renders the results as one Markdown table, a line per row and
// run length, a column per client that ran, followed by the failures and,
// for the rows drawn at random, the aggregate (see aggregate).
func markdown(o options, rs []row, cls []client, results []result) string {
	type key struct {
		row, client string
		run         time.Duration
	}
	byKey := make(map[key]result, len(results))
	var used []string
	var groups []result
	for _, r := range results {
		if r.Procs > 0 || isGroup(cls, r.Client) {
			groups = append(groups, r)
			continue
		}
		byKey[key{r.Row, r.Client, r.Run}] = r
		if !slices.Contains(used, r.Client) {
			used = append(used, r.Client)
		}
	}
	var cols []string
	for _, c := range cls {
		if slices.Contains(used, c.name) {
			cols = append(cols, c.name)
		}
	}
	if len(cols) == 0 {
		return groupTable(rs, cls, groups)
	}
	durs := slices.Clone(o.durs)
	slices.Sort(durs)
	var b, notes strings.Builder
	latency := fmt.Sprintf("%v+%v latency", o.latency, o.jitter)
	if o.random > 0 {
		latency = "each drawn row's own latency (ms + up to ms more, in its name)"
	}
	fmt.Fprintf(&b, "goodput / refused [, bans] (t90), real time over loopback HTTP, %s, %d workers for the in-process clients\n\n",
		latency, o.workers)
	fmt.Fprintf(&b, "| provider policy | run |")
	for _, c := range cols {
		fmt.Fprintf(&b, " %s |", c)
	}
	fmt.Fprintf(&b, "\n|---|---|%s\n", strings.Repeat("---|", len(cols)))
	n := 0
	for _, rw := range rs {
		for _, d := range durs {
			line, any := fmt.Sprintf("| %s | %s |", rw.name, d), false
			for _, c := range cols {
				r, ok := byKey[key{rw.name, c, d}]
				switch {
				case !ok:
					line += " – |"
					continue
				case r.Failed:
					n++
					line += fmt.Sprintf(" failed [%d] |", n)
					fmt.Fprintf(&notes, "[%d] %s, %s, %s: %s\n", n, rw.name, d, c, r.Note)
				default:
					line += " " + r.cell() + " |"
				}
				any = true
			}
			if any {
				b.WriteString(line + "\n")
			}
		}
	}
	if notes.Len() > 0 {
		b.WriteString("\n" + notes.String())
	}
	if o.random > 0 {
		b.WriteString("\n" + aggregate(rs, cols, durs, func(rw row, c string, d time.Duration) (result, bool) {
			r, ok := byKey[key{rw.name, c, d}]
			return r, ok
		}))
	}
	if len(groups) > 0 {
		b.WriteString("\n" + groupTable(rs, cls, groups))
	}
	return b.String()
}

// writeJSON writes one JSON object per result.
func writeJSON(w io.Writer, results []result) error {
	enc := json.NewEncoder(w)
	for _, r := range results {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}

// writeTraces writes each result's per-second counts to dir as
// <run>-<row>-<client>.csv: second,ok,refused,other.
func writeTraces(dir string, results []result) error {
	for _, r := range results {
		var b strings.Builder
		b.WriteString("second,ok,refused,other\n")
		for s, c := range r.PerSecond {
			fmt.Fprintf(&b, "%d,%d,%d,%d\n", s, c[0], c[1], c[2])
		}
		name := fmt.Sprintf("%s-%s-%s", r.Run, slug(r.Row), r.Client)
		if err := os.WriteFile(filepath.Join(dir, name+".csv"), []byte(b.String()), 0o644); err != nil {
			return err
		}
		b.Reset()
		b.WriteString("at_ms,done_ms,status,symbol\n")
		for _, e := range r.events {
			fmt.Fprintf(&b, "%.1f,%.1f,%d,%d\n", float64(e.at.Microseconds())/1e3, float64(e.done.Microseconds())/1e3, e.status, e.sym)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".events.csv"), []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// slug turns a row name into a file name part: lower case letters and
// digits, runs of anything else as one '-'.
func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' {
			b.WriteRune(r)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.Trim(b.String(), "-")
}
