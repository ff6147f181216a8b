package budget_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/budget/budgettest"
	"github.com/forage-go/forage/checkpoint"
)

// learning is a provider config whose rate climbs from a start of 20/s (so
// a learned rate differs from the start), paced in fake time.
func learning() budget.Config {
	cfg := fast()
	cfg.Adaptive = aimd.Config{Initial: 20, Max: 400}
	cfg.MaxWait = time.Minute
	return cfg
}

// TestRestartAtLearnedRateWithFileStore: a process with a file store
// learns a rate and is told "429, Retry-After: 120"; the next process,
// on the same directory after a close and reopen, starts at the learned
// rate and ceiling (not the conservative start) and sends nothing until the
// pause ends, then calls the provider again.
func TestRestartAtLearnedRateWithFileStore(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		open := func() *checkpoint.LocalStore {
			s, err := checkpoint.OpenFileStore(dir, checkpoint.Config{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		const key = "api.example.com"
		ctx := context.Background()
		store := open()
		p := provider(newRegistry(t, budget.RegistryConfig{Defaults: learning(), Records: store}), key)
		for range 300 {
			if err := p.Do(ctx, nil, status(200, 0)); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		until := stopOf(t, p.Do(ctx, nil, status(429, 120*time.Second))).Until
		learned := p.Snapshot()
		if learned.Rate == 20 || learned.Ceiling == 0 {
			t.Fatalf("the first process learned rate %v, ceiling %v; want a rate other than the start (20/s) and a ceiling", learned.Rate, learned.Ceiling)
		}
		synctest.Wait() // any background save is over
		if err := store.Close(); err != nil {
			t.Fatal(err)
		}

		store = open()
		defer store.Close()
		p = provider(newRegistry(t, budget.RegistryConfig{Defaults: learning(), Records: store}), key)
		if got := p.Snapshot(); got.Rate != learned.Rate || got.Ceiling != learned.Ceiling {
			t.Fatalf("after a restart: rate %v, ceiling %v; want the learned %v, %v", got.Rate, got.Ceiling, learned.Rate, learned.Ceiling)
		}
		calls := 0
		stop := stopOf(t, p.Do(ctx, nil, countingAttempt(&calls)))
		if stop.Reason != forage.ReasonThrottled || !stop.Until.Equal(until) || until.Sub(start) < 120*time.Second || calls != 0 {
			t.Fatalf("after a restart: %v until +%v with %d attempts; want throttled until +%v (the 429's pause) and none", stop, stop.Until.Sub(start), calls, until.Sub(start))
		}
		time.Sleep(time.Until(stop.Until))
		if err := p.Do(ctx, nil, countingAttempt(&calls)); err != nil || calls != 1 {
			t.Fatalf("after the pause: %v with %d attempts, want one success", err, calls)
		}
	})
}

// TestLearnedStateSavedInBackground: while the rate climbs, the record is
// saved at most every few seconds (never once per request), in the
// background, with the learned rate and the counters.
func TestLearnedStateSavedInBackground(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := &fakeRecords{}
		cfg := learning()
		cfg.Records = store
		p := newLocal(t, cfg)
		start, n := time.Now(), 0
		for time.Since(start) < 30*time.Second {
			if err := p.Do(context.Background(), nil, status(200, 0)); err != nil {
				t.Fatal(err)
			}
			n++
		}
		synctest.Wait()
		rec, saves := store.record("test")
		if saves == 0 || saves > 30/5+1 {
			t.Fatalf("%d saves for %d requests over 30s; want at least one and at most one per 5s", saves, n)
		}
		if rec.Rate <= 20 || rec.Requests <= 0 || rec.Requests > int64(n) || rec.OK <= 0 || rec.OK > int64(n) || rec.Updated.IsZero() {
			t.Fatalf("saved %+v after %d requests; want a learned rate above the start and the counters", rec, n)
		}
	})
}

// TestSlowRecordStoreNeverSlowsDo: a store that hangs holds up no
// successful call: the learned state is saved in the background, and a
// save that times out is counted.
func TestSlowRecordStoreNeverSlowsDo(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := &fakeRecords{block: make(chan struct{})}
		cfg := learning()
		cfg.Records = store
		p := newLocal(t, cfg)
		start := time.Now()
		for time.Since(start) < 30*time.Second {
			before := time.Now()
			if err := p.Do(context.Background(), nil, status(200, 0)); err != nil {
				t.Fatal(err)
			}
			if took := time.Since(before); took > time.Second/20 {
				t.Fatalf("a successful call took %v at +%v with the store hanging; want no more than its pacing (1/20 s)", took, before.Sub(start))
			}
		}
		synctest.Wait()
		if p.Snapshot().SaveErrors == 0 {
			t.Fatal("no save timed out against a hanging store")
		}
		close(store.block)
	})
}

// TestEvictionSavesRecord: a provider the registry evicts saves its record,
// so its successor starts at the learned rate and the counters go on from
// where it left them.
func TestEvictionSavesRecord(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const key = "api.example.com"
		ctx := context.Background()
		store := checkpoint.NewMemoryStore(checkpoint.Config{})
		reg := newRegistry(t, budget.RegistryConfig{Defaults: learning(), Records: store, IdleTTL: time.Minute})
		calls := func(n int) budget.Snapshot {
			p := provider(reg, key)
			for range n {
				if err := p.Do(ctx, nil, status(200, 0)); err != nil {
					t.Fatal(err)
				}
			}
			return p.Snapshot()
		}
		total := int64(0)
		for i, n := range []int{20, 2} { // 20: a provider with no record is worth one from its 20th request
			before := calls(n)
			total += int64(n)
			time.Sleep(2 * time.Minute)
			synctest.Wait()
			if got := reg.EvictAt(time.Now()); got != 1 {
				t.Fatalf("round %d: EvictAt = %d, want 1", i, got)
			}
			rec, ok, err := store.LoadRecord(ctx, key)
			if err != nil || !ok || rec.Rate != before.Rate || rec.Requests != total {
				t.Fatalf("round %d: saved %+v, %v, %v; want rate %v and %d requests", i, rec, ok, err, before.Rate, total)
			}
			if got := provider(reg, key).Snapshot().Rate; got != before.Rate {
				t.Fatalf("round %d: the successor starts at %v, want the learned %v", i, got, before.Rate)
			}
		}
	})
}

// TestRecordKeepsOperatorStatus: a provider saving its record (here a
// pause) never undoes what an operator set in the store.
func TestRecordKeepsOperatorStatus(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := checkpoint.NewMemoryStore(checkpoint.Config{})
		cfg := learning()
		cfg.Records = store
		p := newLocal(t, cfg)
		_ = p.Do(ctx, nil, status(200, 0)) // its first read of the record
		synctest.Wait()
		// An operator pauses it in the store; before its next read (5 s),
		// the provider meets a 429 and saves its pause.
		if err := store.SaveRecord(ctx, forage.ProviderRecord{Key: "test", Status: "paused", Why: "audit"}); err != nil {
			t.Fatal(err)
		}
		_ = p.Do(ctx, nil, status(429, 2*time.Minute))
		rec, _, err := store.LoadRecord(ctx, "test")
		if err != nil || rec.Status != "paused" || rec.Why != "audit" || rec.PausedUntil.IsZero() {
			t.Fatalf("after the provider saved: %+v, %v; want its pause saved and the operator's status kept", rec, err)
		}
	})
}

// ratesPacer records the rates it is given; it never waits.
type ratesPacer struct {
	mu    sync.Mutex
	rates []float64
	until time.Time
}

func (r *ratesPacer) WaitN(context.Context, int) error { return nil }

func (r *ratesPacer) SetRate(rate float64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rates = append(r.rates, rate)
	return nil
}

func (r *ratesPacer) PauseUntil(t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.until = t
}

// TestRestoredRateIsThePacersFirstRate: a provider restored from its record
// gives its pacer the learned rate as the first rate it hears, and the
// pause in force. A host's pacer may take the first rate it hears as where
// it starts and every later one as a step (the PostgreSQL pacer of old
// did): a restart that first said the conservative start and then the
// learned rate would have cut, or climbed, what such a pacer holds.
func TestRestoredRateIsThePacersFirstRate(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		until := time.Now().Add(time.Minute)
		store := &fakeRecords{m: map[string]forage.ProviderRecord{
			"api.example.com": {Key: "api.example.com", Rate: 3, Ceiling: 5, PausedUntil: until, PauseReason: forage.ReasonThrottled},
		}}
		pacer := &ratesPacer{}
		cfg := learning()
		cfg.Pacer = pacer
		reg := newRegistry(t, budget.RegistryConfig{Overrides: map[string]budget.Config{"api.example.com": cfg}, Records: store})
		provider(reg, "api.example.com")
		pacer.mu.Lock()
		defer pacer.mu.Unlock()
		if len(pacer.rates) != 1 || pacer.rates[0] != 3 || !pacer.until.Equal(until) {
			t.Fatalf("the pacer was given rates %v and the pause %v; want only the learned 3/s, and the pause until %v", pacer.rates, pacer.until, until)
		}
	})
}

// TestEvictionSavesBeforeDropping: a Get that comes while an evicted
// provider's record is being saved finds the provider itself, not a
// successor built from the record as it was before the save (the
// regression: EvictAt dropped the provider, then saved it, so a Get in
// between started again from the conservative rate).
func TestEvictionSavesBeforeDropping(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const key = "api.example.com"
		store := &fakeRecords{}
		reg := newRegistry(t, budget.RegistryConfig{Defaults: learning(), Records: store, IdleTTL: time.Minute})
		p := provider(reg, key)
		for range 50 {
			if err := p.Do(context.Background(), nil, status(200, 0)); err != nil {
				t.Fatal(err)
			}
		}
		learned := p.Snapshot().Rate
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		var during []float64
		store.mu.Lock()
		store.onSave = func() { during = append(during, provider(reg, key).Snapshot().Rate) }
		store.mu.Unlock()
		if n := reg.EvictAt(time.Now()); n != 1 {
			t.Fatalf("EvictAt = %d, want 1", n)
		}
		if len(during) != 1 || during[0] != learned {
			t.Fatalf("a Get during the eviction's save saw rates %v, want the learned %v once", during, learned)
		}
	})
}

// TestRunSavesEveryRecordAtShutdown: when the context of Registry.Run
// ends, every provider's record that changed since its last save is saved
// before Run returns, so a clean shutdown loses none of what was learned
// in its last seconds (before, up to 5 s of it).
func TestRunSavesEveryRecordAtShutdown(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := &fakeRecords{}
		reg := newRegistry(t, budget.RegistryConfig{Defaults: learning(), Records: store})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- reg.Run(ctx) }()
		for _, key := range []string{"a.example.com", "b.example.com"} {
			p := provider(reg, key)
			for range 20 { // a provider with no record is worth one from its 20th request
				if err := p.Do(context.Background(), nil, status(200, 0)); err != nil {
					t.Fatal(err)
				}
			}
		}
		synctest.Wait() // the first background saves are over; 20 requests each came within 5 s of them
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v, want context.Canceled", err)
		}
		for _, key := range []string{"a.example.com", "b.example.com"} {
			rec, ok, _ := store.LoadRecord(context.Background(), key)
			if !ok || rec.Requests != 20 || rec.OK != 20 {
				t.Errorf("%s: saved record %+v (found %v); want the 20 requests counted", key, rec, ok)
			}
		}
	})
}

// TestCapacityEvictionHandsOverTheLearnedState: a provider dropped because
// the registry is full is saved in the background; a Get of its key before
// that save landed gets a provider that starts from the dropped one's
// learned rate, not from the older record in the store (before, it started
// at the conservative rate, and its later saves could overwrite what was
// learned).
func TestCapacityEvictionHandsOverTheLearnedState(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const key = "learner.example.com"
		block := make(chan struct{})
		store := &fakeRecords{block: block} // no save lands until block closes
		reg := newRegistry(t, budget.RegistryConfig{Defaults: learning(), Records: store, MaxProviders: 10})
		p := provider(reg, key)
		for range 50 {
			if err := p.Do(context.Background(), nil, status(200, 0)); err != nil {
				t.Fatal(err)
			}
		}
		learned := p.Snapshot().Rate
		time.Sleep(time.Second)
		for i := range 20 { // the learner, least recently used, is dropped
			provider(reg, fmt.Sprintf("other-%d.example.com", i))
		}
		if _, ok := reg.Lookup(key); ok {
			t.Fatal("the learner was not dropped: the test proves nothing")
		}
		if got := provider(reg, key).Snapshot().Rate; got != learned {
			t.Errorf("made again while its record was being saved: rate %v, want the learned %v", got, learned)
		}
		close(block)
	})
}

// oneRecord is a RecordStore that holds one record, as written by hand or
// by another version, and keeps what is saved.
type oneRecord struct {
	mu sync.Mutex
	r  forage.ProviderRecord
}

func (o *oneRecord) LoadRecord(_ context.Context, key string) (forage.ProviderRecord, bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.r, o.r.Key == key, nil
}

func (o *oneRecord) SaveRecord(_ context.Context, r forage.ProviderRecord) error { return nil }

// TestAHostileRecordStallsNobody: a record whose learned rate is NaN, or
// whose pause ends in 2099, starts the provider as a new one: calls go.
// Before, NaN failed every start of the provider ("State.Rate must be >= 0
// and finite") until the record was fixed by hand, and the pause was
// clamped to MaxPause at each start, and kept by the record: no call for
// good (found by two reviews).
func TestAHostileRecordStallsNobody(t *testing.T) {
	t.Parallel()
	for name, r := range map[string]forage.ProviderRecord{
		"NaN rate":         {Key: "p", Rate: math.NaN(), Ceiling: 10},
		"infinite ceiling": {Key: "p", Rate: 5, Ceiling: math.Inf(1)},
		"negative rate":    {Key: "p", Rate: -3},
		"pause in 2099":    {Key: "p", Rate: 5, PausedUntil: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC), PauseReason: forage.ReasonBanned},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := fast()
				cfg.Records = &oneRecord{r: r}
				p, err := budget.NewLocal("p", cfg)
				if err != nil {
					t.Fatalf("NewLocal with record %+v: %v", r, err)
				}
				run, _ := budget.NewRun(budget.Envelope{})
				if err := p.Do(context.Background(), run, func(context.Context) forage.Outcome { return forage.Outcome{Status: 200} }); err != nil {
					t.Fatalf("Do with record %+v: %v; want the call made", r, err)
				}
				if s := p.Snapshot(); math.IsNaN(s.Rate) || math.IsInf(s.Rate, 0) || s.Rate <= 0 {
					t.Fatalf("rate %v after a record %+v", s.Rate, r)
				}
			})
		})
	}
}

// TestAHostileShareDocumentStallsNobody: a shared document whose pause ends
// a day ahead (a process on a machine whose clock runs a day ahead drew a
// one-second Retry-After), or that holds a dead process's lease of the
// whole rate dated a day ahead, holds nobody for the day: the pause is
// dropped, the lease ends a lease from now. Before, every process paused
// for the day, or waited for the lease for the day (found by a review).
func TestAHostileShareDocumentStallsNobody(t *testing.T) {
	t.Parallel()
	for name, doc := range map[string]func(now time.Time) string{
		"pause a day ahead": func(now time.Time) string {
			return fmt.Sprintf(`{"epoch":1,"rate":10,"paused_until":%q}`, now.Add(24*time.Hour).Format(time.RFC3339Nano))
		},
		"lease a day ahead": func(now time.Time) string {
			return fmt.Sprintf(`{"epoch":1,"rate":10,"leases":{"elsewhere-77-abcd":{"share":1e300,"hungry":true,"expires":%q}}}`,
				now.Add(24*time.Hour).Format(time.RFC3339Nano))
		},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := budgettest.NewShareStore()
				if err := store.UpdateShares(context.Background(), "p", func([]byte) ([]byte, error) { return []byte(doc(time.Now())), nil }); err != nil {
					t.Fatal(err)
				}
				cfg := fast()
				cfg.Shares = store
				p, err := budget.NewLocal("p", cfg)
				if err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				run, _ := budget.NewRun(budget.Envelope{})
				ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
				defer cancel()
				if err := p.Do(ctx, run, func(context.Context) forage.Outcome { return forage.Outcome{Status: 200} }); err != nil || time.Since(start) > 10*time.Second {
					t.Fatalf("Do = %v after %v; want the call made within seconds", err, time.Since(start))
				}
			})
		})
	}
}

// TestAProviderThatLearnedNothingLeavesNoRecord: a crawler's registry
// meets a provider per host, most called once or twice. Such a provider,
// which learned nothing of its limits, leaves no record when it is evicted
// (3,000 hosts crawled left 3,000 records for good, each "rate 4, 1
// request", read at every open of a file store); one that was refused, or
// was sent 20 requests, does, and so does one that had a record.
func TestAProviderThatLearnedNothingLeavesNoRecord(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := checkpoint.NewMemoryStore(checkpoint.Config{})
		if err := store.SaveRecord(ctx, forage.ProviderRecord{Key: "known.example", Rate: 3}); err != nil {
			t.Fatal(err)
		}
		reg := newRegistry(t, budget.RegistryConfig{Defaults: learning(), Records: store, IdleTTL: time.Minute})
		calls := map[string][]int{ // the statuses each host answers
			"once.example": {200}, "twice.example": {200, 200}, "known.example": {200},
			"refused.example": {429, 200}, "busy.example": slices.Repeat([]int{200}, 20),
		}
		for key, codes := range calls {
			p := provider(reg, key)
			for _, code := range codes {
				_ = p.Do(ctx, nil, status(code, 0))
			}
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if got := reg.EvictAt(time.Now()); got != len(calls) {
			t.Fatalf("EvictAt = %d, want %d", got, len(calls))
		}
		for key, want := range map[string]bool{"once.example": false, "twice.example": false, "known.example": true, "refused.example": true, "busy.example": true} {
			rec, ok, err := store.LoadRecord(ctx, key)
			if err != nil || ok != want {
				t.Errorf("%s: record found %v (%+v, %v), want %v", key, ok, rec, err, want)
			}
		}
	})
}
