package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/klines"
	"github.com/forage-go/forage/slice"
)

// summary is what a collect command did: the JSON of -json, one line.
type summary struct {
	// Status is "done" (every stream caught up), "deferred" (a stream
	// stopped with a gap: the budget ran out or the provider pushed back),
	// "yielded" (another live process holds a stream, see Streams: nothing
	// was done for it), "empty" (a stream has no candle at all: the
	// provider answered none, e.g. the symbol is not listed yet; nothing is
	// covered and the next run asks again), "interrupted" (SIGINT/SIGTERM)
	// or "failed" (see Error).
	Status string `json:"status"`
	// Error is the failure, for status "failed".
	Error string `json:"error,omitempty"`
	// Provider is the provider key the budget is kept under.
	Provider string `json:"provider"`
	// Store is "file" or "postgres".
	Store string `json:"store"`
	// Requests, OK, Throttled and Retries are the provider's counters:
	// attempts sent, successes, 429/418 answers, retries granted.
	Requests  uint64 `json:"requests"`
	OK        uint64 `json:"ok"`
	Throttled uint64 `json:"throttled"`
	Retries   int64  `json:"retries"`
	// Candles counts the candles written, Slices the pages committed, and
	// Commits the durable writes that committed them: one sink write and
	// one checkpoint commit each, of every page that landed while the
	// write before it was synced (slice.Config.MaxBatch).
	Candles int `json:"candles"`
	Slices  int `json:"slices"`
	Commits int `json:"commits"`
	// Gaps are the gap records the run left open: why each stream stopped
	// short, and where it resumes.
	Gaps []gapInfo `json:"gaps"`
	// ElapsedS is the run's wall-clock time, in seconds.
	ElapsedS float64 `json:"elapsed_s"`
	// LearnedRate is the rate, in requests per second, the provider is
	// paced at by the end; Ceiling the learned ceiling (0 until a limit
	// was hit).
	LearnedRate float64 `json:"learned_rate"`
	Ceiling     float64 `json:"ceiling"`
	// Streams details every stream run.
	Streams []*streamStats `json:"streams"`
}

// gapInfo is one open gap record, or, with ID 0, a catch-up that ended
// without one: the deadline passed while it waited to run.
type gapInfo struct {
	ID     int64  `json:"id"`
	Symbol string `json:"symbol"`
	Mode   string `json:"mode"`
	Reason string `json:"reason"`
	// After is the open time of the last candle committed before the gap;
	// empty when the stream had none yet.
	After string `json:"after,omitempty"`
	// Until is when the provider may be called again, after pressure.
	Until string `json:"until,omitempty"`
}

// streamStats is the tally of one stream (a symbol in one mode).
type streamStats struct {
	Symbol  string `json:"symbol"`
	Mode    string `json:"mode"`
	Runs    int    `json:"runs"`
	Slices  int    `json:"slices"`
	Commits int    `json:"commits"`
	Candles int    `json:"candles"`
	// Last is the open time of the last candle the stream committed past.
	Last string `json:"last,omitempty"`
	// Yielded is true if another live process held the stream's lease:
	// nothing was done for it. HeldBy names the lease's owner and
	// HeldUntil (RFC 3339) is when it expires unless renewed.
	Yielded   bool   `json:"yielded,omitempty"`
	HeldBy    string `json:"held_by,omitempty"`
	HeldUntil string `json:"held_until,omitempty"`

	gaps   []checkpoint.Gap // left open by the last run
	until  time.Time        // the last run's time to resume after pressure
	failed bool             // its run failed the command (stderr says why)
	paused bool             // its last run found the provider paused by an operator
}

// stats returns the tally of sym in mode, made at its first run.
func (c *collector) stats(sym string, mode checkpoint.Mode) *streamStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.streams {
		if st.Symbol == sym && st.Mode == mode.String() {
			return st
		}
	}
	st := &streamStats{Symbol: sym, Mode: mode.String()}
	c.streams = append(c.streams, st)
	return st
}

// record adds one run to st. The gaps a run left are the stream's open
// gaps until its next run without an error supersedes them.
func (c *collector) record(st *streamStats, rep slice.Report, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st.Runs++
	st.Slices += rep.Slices
	st.Commits += rep.Commits
	st.Candles += rep.Records
	st.Yielded = st.Yielded || rep.Yielded
	if rep.Yielded {
		st.HeldBy = rep.HeldBy
		if !rep.HeldUntil.IsZero() {
			st.HeldUntil = rep.HeldUntil.UTC().Format(time.RFC3339)
		}
	}
	if t, derr := klines.DecodeCursor(rep.Cursor); len(rep.Cursor) > 0 && derr == nil {
		st.Last = t.Format(time.RFC3339)
	}
	switch {
	case err == nil && !rep.Yielded:
		st.gaps, st.until = rep.Gaps, rep.Until
	case err != nil && len(rep.Gaps) > 0:
		// A permanent provider error (a lie, a broken contract) leaves a
		// gap naming it at the last commit.
		st.gaps, st.until = rep.Gaps, time.Time{}
	}
	repeat := rep.Reason == forage.ReasonPaused && rep.Slices == 0 && st.paused // asked again every second while paused
	st.paused = rep.Reason == forage.ReasonPaused
	if c.verbose != nil && !repeat && (rep.Slices > 0 || rep.Reason != "" || rep.Yielded) {
		line := fmt.Sprintf("ohlcv: %s %s %s: %d slices, %d candles, last %s", st.Symbol, c.o.interval, st.Mode, rep.Slices, rep.Records, st.Last)
		switch {
		case rep.Reason == forage.ReasonDeadline && !c.runSpent():
			// The stream's turn (RunFor) is over, not the command: the
			// scheduler runs it again. ("stopped: deadline" every minute
			// read as the command's -timeout.)
			line += ", turn over: runs again"
		case rep.Reason != "":
			line += ", stopped: " + string(rep.Reason)
		}
		if rep.Yielded {
			line += ", yielded: leased by " + rep.HeldBy
		}
		fmt.Fprintln(c.verbose, line)
	}
}

// runSpent reports whether the command's run (its -timeout, its
// -max-requests) is spent.
func (c *collector) runSpent() bool {
	if c.run == nil {
		return false
	}
	_, spent := c.run.ExhaustedAt(time.Now())
	return spent
}

// summary sums up the run.
func (c *collector) summary(elapsed time.Duration, interrupted bool, err error) summary {
	c.mu.Lock()
	defer c.mu.Unlock()
	snap := c.provider.Snapshot()
	s := summary{
		Status: "done", Provider: snap.Key, Store: "file",
		Requests: snap.Requests, OK: snap.OK, Throttled: snap.Throttled, Retries: snap.Retries,
		Gaps: []gapInfo{}, ElapsedS: elapsed.Seconds(), LearnedRate: snap.Rate, Ceiling: snap.Ceiling,
		Streams: c.streams,
	}
	if s.Streams == nil {
		s.Streams = []*streamStats{} // no stream ran: a list still, as failedToStart's
	}
	if isPostgres(c.o.store) {
		s.Store = "postgres"
	}
	for _, st := range c.streams {
		s.Candles += st.Candles
		s.Slices += st.Slices
		s.Commits += st.Commits
		for _, g := range st.gaps {
			gi := gapInfo{ID: g.ID, Symbol: st.Symbol, Mode: st.Mode, Reason: g.Reason}
			if t, derr := klines.DecodeCursor(g.Cursor); len(g.Cursor) > 0 && derr == nil {
				gi.After = t.Format(time.RFC3339)
			}
			if !st.until.IsZero() {
				gi.Until = st.until.UTC().Format(time.RFC3339)
			}
			s.Gaps = append(s.Gaps, gi)
		}
	}
	switch {
	case err != nil:
		s.Status, s.Error = "failed", err.Error()
	case interrupted:
		s.Status = "interrupted"
	case slices.ContainsFunc(s.Streams, func(st *streamStats) bool { return st.Yielded }):
		s.Status = "yielded"
	case len(s.Gaps) > 0:
		s.Status = "deferred"
	case slices.ContainsFunc(s.Streams, func(st *streamStats) bool { return st.Last == "" && st.Runs > 0 }):
		s.Status = "empty"
	}
	if s.Status == "done" || s.Status == "empty" || s.Status == "deferred" {
		// A catch-up that neither reached until nor stopped with a gap (the
		// deadline passed while it waited to run, or another stream spent
		// the budget while it was between two requests) is never done: it
		// is deferred, and says why.
		now := time.Now()
		why := "unfinished"
		if r, spent := c.run.ExhaustedAt(now); spent {
			why = string(r)
		}
		if snap.PausedUntil.After(now) {
			// What held the streams back: the provider's pause (saved by
			// an earlier run, or asked for in this one), not the clock.
			why += fmt.Sprintf("; the provider's pause (%s) lasts until %s", orThrottled(snap.PauseReason), snap.PausedUntil.UTC().Format(time.RFC3339))
		}
		for _, sym := range c.o.symbols {
			if slices.ContainsFunc(s.Gaps, func(g gapInfo) bool { return g.Symbol == sym && g.Mode == checkpoint.CatchUp.String() }) {
				continue // its run's gap says why
			}
			if ss := c.states[sym]; ss == nil || !ss.caughtUp && !ss.yielded && !ss.spent {
				s.Status = "deferred"
				reason := why
				if ss != nil && ss.short {
					reason = "the provider has not published the last candles before until yet"
				}
				gi := gapInfo{Symbol: sym, Mode: checkpoint.CatchUp.String(), Reason: reason}
				if t, ok := c.committed(sym); ok {
					gi.After = t.Format(time.RFC3339) // where it stands, from an earlier run too
				}
				if snap.PausedUntil.After(now) {
					gi.Until = snap.PausedUntil.UTC().Format(time.RFC3339)
				}
				s.Gaps = append(s.Gaps, gi)
			}
		}
	}
	return s
}

// failedToStart is the summary of a run that failed before it collected
// anything, e.g. because its store could not be opened.
func failedToStart(o options, provider string, elapsed time.Duration, err error) summary {
	s := summary{Status: "failed", Error: err.Error(), Provider: provider, Store: "file",
		Gaps: []gapInfo{}, ElapsedS: elapsed.Seconds(), Streams: []*streamStats{}}
	if isPostgres(o.store) {
		s.Store = "postgres"
	}
	return s
}

// print writes s as one JSON line, or as a few lines for people.
func (s summary) print(w io.Writer, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(s)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d candles in %d slices (%d commits) from %s into the %s store, %.1fs\n",
		s.Status, s.Candles, s.Slices, s.Commits, s.Provider, s.Store, s.ElapsedS)
	fmt.Fprintf(&b, "requests %d (ok %d, throttled %d, retries %d), learned rate %.1f req/s\n",
		s.Requests, s.OK, s.Throttled, s.Retries, s.LearnedRate)
	for _, st := range s.Streams {
		fmt.Fprintf(&b, "  %-10s %-12s %4d slices %7d candles  last %s\n", st.Symbol, st.Mode, st.Slices, st.Candles, st.Last)
	}
	for _, h := range s.held() {
		fmt.Fprintf(&b, "  nothing done for %s\n", h)
	}
	for _, st := range s.Streams {
		if st.Last == "" && st.Runs > 0 && !st.Yielded {
			switch {
			case st.failed:
				continue // its error ends the output, on stderr
			case s.Status == "failed":
				fmt.Fprintf(&b, "  %s %s: nothing collected: the command ended on another stream's failure\n", st.Symbol, st.Mode)
				continue
			}
			why := "not listed, or it answered none"
			if s.OK == 0 {
				why = "no answer yet"
			}
			fmt.Fprintf(&b, "  %s %s: no candle from the provider yet (%s): nothing covered, the next run asks again\n", st.Symbol, st.Mode, why)
		}
	}
	for _, g := range s.Gaps {
		fmt.Fprintf(&b, "  gap %d: %s %s stopped (%s) after %s", g.ID, g.Symbol, g.Mode, g.Reason, orNone(g.After))
		if g.Until != "" {
			fmt.Fprintf(&b, "; the provider may be called again at %s", g.Until)
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// held describes each stream another process held, for people.
func (s summary) held() []string {
	var out []string
	for _, st := range s.Streams {
		if st.Yielded {
			h := fmt.Sprintf("%s %s: its stream is leased by another live process", st.Symbol, st.Mode)
			if st.HeldBy != "" {
				h += fmt.Sprintf(" (%s", st.HeldBy)
				if st.HeldUntil != "" {
					h += ", until " + st.HeldUntil + " unless renewed"
				}
				h += ")"
			}
			out = append(out, h)
		}
	}
	return out
}

// committed returns the open time of the last candle sym's catch-up
// committed past, by this run or an earlier one, and whether it has one.
func (c *collector) committed(sym string) (time.Time, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	cp, err := c.be.checkpoints().Load(ctx, checkpoint.Key{Stream: "ohlcv/" + sym + "/" + c.o.interval, Mode: checkpoint.CatchUp})
	if err != nil || len(cp.Cursor) == 0 {
		return time.Time{}, false
	}
	t, err := klines.DecodeCursor(cp.Cursor)
	return t, err == nil
}

// orThrottled names a pause's reason, throttled when it has none.
func orThrottled(r forage.Reason) forage.Reason {
	if r == "" {
		return forage.ReasonThrottled
	}
	return r
}

func orNone(s string) string {
	if s == "" {
		return "the start"
	}
	return s
}
