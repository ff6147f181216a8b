package slice_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
)

// candle is the examples' record: one one-minute candle.
type candle struct {
	Open  time.Time
	Close float64
}

// exchange stands in for a klines endpoint (setup for the examples): a
// one-minute candle for every minute, served 10 per request. The cursor is
// the open time of the next candle.
type exchange struct {
	start time.Time // where the stream begins
	now   time.Time // the exchange's clock
}

// Next plans the window of up to 10 candles after cursor; the candle still
// forming at now is never planned.
func (e exchange) Next(_ context.Context, cursor []byte, within checkpoint.Range) (slice.Slice, bool, error) {
	from, end := e.start, e.now.Truncate(time.Minute)
	if !within.IsZero() { // a fill: only inside the range
		from = within.Start
		if within.End.Before(end) {
			end = within.End
		}
	}
	if len(cursor) > 0 {
		var err error
		if from, err = time.Parse(time.RFC3339, string(cursor)); err != nil {
			return slice.Slice{}, false, err
		}
	}
	if !from.Before(end) {
		return slice.Slice{}, false, nil // caught up
	}
	if lim := from.Add(10 * time.Minute); lim.Before(end) {
		end = lim
	}
	return slice.Slice{Range: checkpoint.Range{Start: from, End: end}}, true, nil
}

// Fetch "requests" the window: one outbound call per attempt.
func (e exchange) Fetch(_ context.Context, s slice.Slice) (slice.Page[candle], forage.Outcome) {
	var p slice.Page[candle]
	for t := s.Range.Start; t.Before(s.Range.End); t = t.Add(time.Minute) {
		p.Records = append(p.Records, candle{Open: t, Close: 100 + float64(t.Minute())})
	}
	p.Next = []byte(s.Range.End.Format(time.RFC3339))
	p.Covered = s.Range // the exchange answered for the whole window
	return p, forage.Outcome{Status: 200}
}

// at returns 2030-01-01 h:m UTC.
func at(h, m int) time.Time { return time.Date(2030, 1, 1, h, m, 0, 0, time.UTC) }

// newRunner wires a steady-state runner for the examples: the exchange
// above, an in-memory table as the sink, a memory store and a fast local
// provider (setup).
func newRunner(store checkpoint.Store, table map[time.Time]candle) *slice.Runner[candle] {
	provider, err := budget.NewLocal("exchange", budget.Config{Burst: 100, Adaptive: aimd.Config{Initial: 1000, Max: 1000}})
	if err != nil {
		panic(err)
	}
	runner, err := slice.New(slice.Config[candle]{
		Stream:   "exchange/BTC-USDT/1m",
		Mode:     checkpoint.SteadyState,
		Store:    store,
		Provider: provider,
		Source:   exchange{start: at(12, 0), now: at(12, 35).Add(20 * time.Second)},
		Sink: slice.SinkFunc[candle](func(_ context.Context, p slice.Page[candle]) error {
			for _, c := range p.Records {
				table[c.Open] = c // an upsert on the natural key: replays are harmless
			}
			return nil
		}),
		Series: "exchange/BTC-USDT/1m",
	})
	if err != nil {
		panic(err)
	}
	return runner
}

func ExampleNew() {
	// A missing collaborator is an error that says how to fix it.
	_, err := slice.New(slice.Config[candle]{Stream: "exchange/BTC-USDT/1m", Mode: checkpoint.CatchUp})
	fmt.Println(errors.Is(err, slice.ErrInvalidConfig))
	fmt.Println(err)
	// Output:
	// true
	// slice: Config.Store must be set: use checkpoint.NewMemoryStore, checkpoint.OpenFileStore or a database store (got nil)
}

func ExampleRunner_Run() {
	ctx := context.Background()
	store := checkpoint.NewMemoryStore(checkpoint.Config{})
	table := map[time.Time]candle{}
	runner := newRunner(store, table)

	// An owner's envelope of 2 requests: the run stops at a slice boundary,
	// records a gap at the last committed cursor, and is not an error.
	run, _ := budget.NewRun(budget.Envelope{MaxRequests: 2})
	rep, err := runner.Run(ctx, run)
	fmt.Println(rep.Slices, "slices,", rep.Reason, "at", string(rep.Cursor), "gaps:", len(rep.Gaps), "err:", err)

	// The next run resumes from the checkpoint, catches up, and resolves the
	// gap it passed.
	rep, err = runner.Run(ctx, nil)
	fmt.Println(rep.Slices, "slices, caught up at", string(rep.Cursor), "resolved:", rep.Resolved, "err:", err)
	fmt.Println(len(table), "candles stored")
	// Output:
	// 2 slices, request_cap at 2030-01-01T12:20:00Z gaps: 1 err: <nil>
	// 2 slices, caught up at 2030-01-01T12:35:00Z resolved: 1 err: <nil>
	// 35 candles stored
}

func ExampleRunner_Fill() {
	ctx := context.Background()
	store := checkpoint.NewMemoryStore(checkpoint.Config{})
	table := map[time.Time]candle{}
	runner := newRunner(store, table)
	_, _ = runner.Run(ctx, nil) // the stream holds 12:00-12:35 (setup)

	// The series must hold the last hour of closed candles: plan what is
	// missing from the coverage the runs recorded, and fill it.
	cov, _ := store.Coverage(ctx, "exchange/BTC-USDT/1m")
	now := at(12, 35).Add(20 * time.Second)
	policy := slice.FillPolicy{Interval: time.Minute, Required: time.Hour}
	plan, err := slice.PlanFill(now, cov, policy)
	fmt.Println("plan:", plan, err)
	rep, err := runner.Fill(ctx, nil, plan)
	fmt.Println(rep.Records, "candles filled, err:", err)

	cov, _ = store.Coverage(ctx, "exchange/BTC-USDT/1m")
	fmt.Println("covered:", cov)
	plan, err = slice.PlanFill(now, cov, policy)
	fmt.Println("left to plan:", plan, err)
	// Output:
	// plan: [[2030-01-01T11:35:00Z, 2030-01-01T12:00:00Z)] <nil>
	// 25 candles filled, err: <nil>
	// covered: {[2030-01-01T11:35:00Z, 2030-01-01T12:35:00Z)}
	// left to plan: [] <nil>
}

func ExampleRunner_Drain() {
	ctx := context.Background()
	store := checkpoint.NewMemoryStore(checkpoint.Config{})
	table := map[time.Time]candle{}
	runner := newRunner(store, table)

	// A fill that runs out of budget leaves a range gap (setup) ...
	run, _ := budget.NewRun(budget.Envelope{MaxRequests: 1})
	rep, _ := runner.Fill(ctx, run, []checkpoint.Range{{Start: at(10, 0), End: at(10, 30)}})
	g := rep.Gaps[0]
	fmt.Println("gap:", g.Range, "after", string(g.Cursor), g.Reason)

	// ... which a later Drain finishes from where the fill stopped.
	rep, err := runner.Drain(ctx, nil)
	fmt.Println(rep.Records, "candles,", rep.Resolved, "gap resolved, err:", err)
	// Output:
	// gap: [2030-01-01T10:00:00Z, 2030-01-01T10:30:00Z) after 2030-01-01T10:10:00Z request_cap
	// 20 candles, 1 gap resolved, err: <nil>
}

func ExamplePlanFill() {
	// The series holds 13:15-13:25 of one-minute candles and it is 13:30:20:
	// the candle 13:30 is still forming.
	var covered checkpoint.Coverage
	covered.Add(checkpoint.Range{Start: at(13, 15), End: at(13, 25)})
	now := at(13, 30).Add(20 * time.Second)

	// Hold the last 100 minutes, at most 60 minutes of requests per call.
	policy := slice.FillPolicy{Interval: time.Minute, Required: 100 * time.Minute, MaxPerRun: time.Hour}
	plan, err := slice.PlanFill(now, covered, policy)
	if err != nil {
		panic(err) // only an invalid policy fails
	}
	for _, r := range plan {
		fmt.Println(r.Start.Format("15:04"), "-", r.End.Format("15:04"))
	}
	// Output:
	// 13:25 - 13:30
	// 12:20 - 13:15
}

// predictingExchange is the exchange above, saying where each slice will
// end: it answers every window in full (setup).
type predictingExchange struct{ exchange }

// Expect predicts the cursor after s: the end of its window.
func (e predictingExchange) Expect(s slice.Slice) ([]byte, bool) {
	return []byte(s.Range.End.Format(time.RFC3339)), true
}

func ExamplePredictor() {
	provider, _ := budget.NewLocal("exchange", budget.Config{Burst: 100, Adaptive: aimd.Config{Initial: 1000, Max: 1000}})
	table := map[time.Time]candle{}
	runner, err := slice.New(slice.Config[candle]{
		Stream: "exchange/BTC-USDT/1m", Mode: checkpoint.CatchUp,
		Store: checkpoint.NewMemoryStore(checkpoint.Config{}), Provider: provider,
		// A Predictor: up to 1+Prefetch windows are fetched at once, and
		// their pages are still written and committed in order.
		Source:   predictingExchange{exchange{start: at(12, 0), now: at(12, 35).Add(20 * time.Second)}},
		Prefetch: 3,
		Sink: slice.SinkFunc[candle](func(_ context.Context, p slice.Page[candle]) error {
			for _, c := range p.Records {
				table[c.Open] = c
			}
			return nil
		}),
	})
	if err != nil {
		panic(err)
	}
	rep, err := runner.Run(context.Background(), nil)
	fmt.Println(rep.Slices, "slices,", rep.Records, "candles, caught up at", string(rep.Cursor), "discarded:", rep.Discarded, "err:", err)
	// Output:
	// 4 slices, 35 candles, caught up at 2030-01-01T12:35:00Z discarded: 0 err: <nil>
}

// table is a TxSink over an in-memory table and a memory store (setup): a
// transaction is the table's lock held across the checkpoint's
// compare-and-swap and the upsert, which cannot fail after it, so both
// land or neither does. A database does the same with one transaction
// (pgstore.NewTxSink).
type table struct {
	mu    sync.Mutex
	store checkpoint.Store
	rows  map[time.Time]candle
}

// Write upserts p's records without a checkpoint (a fill).
func (t *table) Write(_ context.Context, p slice.Page[candle]) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range p.Records {
		t.rows[c.Open] = c
	}
	return nil
}

// Commit commits p.Next and upserts p's records, in one step.
func (t *table) Commit(ctx context.Context, key checkpoint.Key, p slice.Page[candle], expect int64, lease checkpoint.Lease) (checkpoint.Checkpoint, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cp, err := t.store.Commit(ctx, key, p.Next, expect, lease)
	if err != nil {
		return cp, err // a lost compare-and-swap or lease: no record lands
	}
	for _, c := range p.Records {
		t.rows[c.Open] = c
	}
	return cp, nil
}

// A TxSink writes each page and commits the cursor after it in one step:
// the run never calls Store.Commit itself, and a crash replays nothing.
func ExampleTxSink() {
	ctx := context.Background()
	store := checkpoint.NewMemoryStore(checkpoint.Config{})
	sink := &table{store: store, rows: map[time.Time]candle{}}
	provider, _ := budget.NewLocal("exchange", budget.Config{Burst: 100, Adaptive: aimd.Config{Initial: 1000, Max: 1000}}) // setup

	runner, err := slice.New(slice.Config[candle]{
		Stream:   "exchange/BTC-USDT/1m",
		Mode:     checkpoint.CatchUp,
		Store:    store, // loads the checkpoint, leases the stream
		Provider: provider,
		Source:   exchange{start: at(12, 0), now: at(12, 35).Add(20 * time.Second)},
		TxSink:   sink, // instead of Sink: writes and commits together
	})
	if err != nil {
		panic(err)
	}
	rep, err := runner.Run(ctx, nil)
	fmt.Println(rep.Slices, "slices,", rep.Commits, "commits,", len(sink.rows), "candles, at", string(rep.Cursor), "err:", err)
	// Output:
	// 4 slices, 4 commits, 35 candles, at 2030-01-01T12:35:00Z err: <nil>
}
