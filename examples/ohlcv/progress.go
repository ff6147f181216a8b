package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/klines"
	"github.com/forage-go/forage/slice"
)

// lineEvery is how often a run whose stderr is not a terminal says how far
// it is, in one line.
const lineEvery = 10 * time.Second

// isTerminal reports whether w is a terminal: progress is drawn as bars
// there, and written as a line every lineEvery elsewhere.
func isTerminal(w io.Writer) bool {
	if s, ok := w.(*syncWriter); ok {
		w = s.w
	}
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// streamProgress is how far one symbol's stream is: its sources' fetches
// move it, its runs' outcomes set its state, and the display reads it.
// It is safe for concurrent use.
type streamProgress struct {
	symbol         string
	pages, candles atomic.Int64
	back, head     atomic.Int64 // unix ms of the last candle fetched in catch-up, steady state; 0 none
	waitUntil      atomic.Int64 // unix ns: the stream waits for the provider until then
	why            atomic.Pointer[string]
	caughtUp       atomic.Bool
	held           atomic.Bool // its last run found it leased by another live process
}

// fetched moves p past a page fetched by the catch-up (head false) or
// steady-state source.
func (p *streamProgress) fetched(page slice.Page[klines.Candle], head bool) {
	p.pages.Add(1)
	p.candles.Add(int64(len(page.Records)))
	t, err := klines.DecodeCursor(page.Next)
	if err != nil {
		return
	}
	at := &p.back
	if head {
		at = &p.head
	}
	for ms := t.UnixMilli(); ; {
		old := at.Load()
		if ms <= old || at.CompareAndSwap(old, ms) {
			return
		}
	}
}

// waiting records that the stream waits until until, for why.
func (p *streamProgress) waiting(until time.Time, why string) {
	p.why.Store(&why)
	p.waitUntil.Store(until.UnixNano())
}

// watched is a klines Source whose successful fetches move its stream's
// progress. It embeds the Source, so a run still fetches ahead
// (slice.Predictor).
type watched struct {
	*klines.Source
	p    *streamProgress
	head bool
}

var _ slice.Predictor = watched{}

// Fetch fetches s and counts the page if the attempt succeeded.
func (w watched) Fetch(ctx context.Context, s slice.Slice) (slice.Page[klines.Candle], forage.Outcome) {
	page, out := w.Source.Fetch(ctx, s)
	if out.Class() == forage.Success {
		w.p.fetched(page, w.head)
	}
	return page, out
}

// position returns how many of the catch-up window's candles p is past,
// and the window's count.
func (c *collector) position(p *streamProgress) (done, total int64) {
	total = int64(c.o.until.Sub(c.o.since) / c.o.step)
	if ms := p.back.Load(); ms != 0 {
		done = int64(time.UnixMilli(ms).Sub(c.o.since)/c.o.step) + 1
	}
	if p.caughtUp.Load() {
		done = total
	}
	return min(max(done, 0), total), total
}

// state says, for people, what p's stream is doing at now: waiting for
// the provider (a wait of a second or more: a shorter one is pacing),
// catching up (and how far its cursor is from now), or steady.
func (c *collector) state(p *streamProgress, now time.Time) string {
	if u := time.Unix(0, p.waitUntil.Load()); u.Sub(now) >= time.Second {
		why := ""
		if w := p.why.Load(); w != nil {
			why = " (" + *w + ")"
		}
		return fmt.Sprintf("waiting until %s%s", u.Local().Format(time.TimeOnly), why)
	}
	if p.held.Load() {
		return "held by another process"
	}
	if snap := c.provider.Snapshot(); snap.Status == budget.StatusPaused {
		return operatorPause(snap)
	}
	if u := c.provider.Snapshot().PausedUntil; u.Sub(now) >= time.Second {
		return fmt.Sprintf("waiting until %s (the provider's pause)", u.Local().Format(time.TimeOnly))
	}
	if !p.caughtUp.Load() {
		from := c.o.since
		if ms := p.back.Load(); ms != 0 {
			from = time.UnixMilli(ms).Add(c.o.step)
		}
		return fmt.Sprintf("catching up, %s behind", behind(now.Sub(from)))
	}
	if !c.o.follow {
		return "caught up"
	}
	if ms := p.head.Load(); ms != 0 {
		return "steady, last candle " + time.UnixMilli(ms).Local().Format(time.TimeOnly)
	}
	return "steady"
}

// operatorPause says that an operator paused the provider of snap, and why
// when they said.
func operatorPause(snap budget.Snapshot) string {
	if snap.Why != "" {
		return "paused by an operator (" + strings.Join(strings.Fields(snap.Why), " ") + ")"
	}
	return "paused by an operator"
}

// behind writes d for people: 5d20h, 3h05m, 42s.
func behind(d time.Duration) string {
	switch {
	case d >= 24*time.Hour:
		return fmt.Sprintf("%dd%02dh", d/(24*time.Hour), d%(24*time.Hour)/time.Hour)
	case d >= time.Hour:
		return fmt.Sprintf("%dh%02dm", d/time.Hour, d%time.Hour/time.Minute)
	case d > 0:
		return d.Round(time.Second).String()
	}
	return "0s"
}

// showProgress shows every stream's progress on stderr until the returned
// stop is called: a bar per stream when e says stderr is a terminal, a
// line every e.lineEvery otherwise (none when that is zero). It returns
// where the run's other stderr lines go meanwhile: above the bars, which
// would otherwise be torn by them.
func (c *collector) showProgress(e env, stderr io.Writer) (out io.Writer, stop func()) {
	switch {
	case e.bars != nil && e.bars(stderr):
		return c.bars(stderr)
	case e.lineEvery > 0:
		return stderr, c.lines(stderr, e.lineEvery)
	}
	return stderr, func() {}
}

// lines writes one line of progress to w every every, until stop.
func (c *collector) lines(w io.Writer, every time.Duration) (stop func()) {
	start := time.Now()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				fmt.Fprintln(w, c.line(now, now.Sub(start)))
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// line is the one-line progress of every stream at now, elapsed into the
// run.
func (c *collector) line(now time.Time, elapsed time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ohlcv: %s:", elapsed.Round(time.Second))
	var candles int64
	for i, sym := range c.o.symbols {
		p := c.progress[sym]
		done, total := c.position(p)
		candles += p.candles.Load()
		sep := ","
		if i == 0 {
			sep = ""
		}
		fmt.Fprintf(&b, "%s %s %d%% %s", sep, sym, percent(done, total), c.state(p, now))
	}
	s := c.provider.Snapshot()
	fmt.Fprintf(&b, "; %d candles fetched, %d requests, paced at %.1f req/s", candles, s.Requests, s.Rate)
	return b.String()
}

// percent is done of total in percent, rounded down.
func percent(done, total int64) int64 {
	if total <= 0 {
		return 100
	}
	return 100 * done / total
}

// bars draws a bar per stream on the terminal w, until stop.
func (c *collector) bars(w io.Writer) (out io.Writer, stop func()) {
	// w was found to be a terminal (see env.bars): mpb redraws in place
	// when it finds one too, and draws anyway (a test's buffer) if not.
	p := mpb.New(mpb.WithOutput(w), mpb.WithAutoRefresh(), mpb.WithRefreshRate(200*time.Millisecond))
	width := 0
	for _, sym := range c.o.symbols {
		width = max(width, len(sym))
	}
	bars := make([]*mpb.Bar, len(c.o.symbols))
	for i, sym := range c.o.symbols {
		sp := c.progress[sym]
		// Made with no total, so reaching it does not end the bar: a
		// stream with -follow goes on after its catch-up.
		bars[i] = p.AddBar(0, mpb.BarWidth(24), // narrower when the text needs the room
			mpb.PrependDecorators(decor.Name(fmt.Sprintf("%-*s %s", width, sym, c.o.interval), decor.WC{C: decor.DindentRight | decor.DextraSpace})),
			mpb.AppendDecorators(decor.Any(func(decor.Statistics) string {
				done, total := c.position(sp)
				return fmt.Sprintf("%3d%% %d candles/%d pages · %s", percent(done, total), sp.candles.Load(), sp.pages.Load(), c.state(sp, time.Now()))
			})),
		)
	}
	move := func() {
		for i, sym := range c.o.symbols {
			done, total := c.position(c.progress[sym])
			bars[i].SetTotal(total, false)
			bars[i].SetCurrent(done)
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			move()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return p, func() {
		close(done)
		wg.Wait()
		move()
		for i, sym := range c.o.symbols {
			if c.progress[sym].caughtUp.Load() && !c.o.follow {
				bars[i].SetTotal(-1, true) // complete
			} else {
				bars[i].Abort(false) // stopped where it is, and kept on screen
			}
		}
		p.Wait()
	}
}
