package budget_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
)

// TestOperatorPauseHoldsInEveryProcess: an operator's pause, set through
// one registry, stops every call of that provider at once, before any
// attempt, with ReasonPaused (source pressure, naming why); another
// registry sharing the records (another process) obeys it within one
// read of the record, about five seconds; a registry made afterwards (a
// restart) starts paused; and a resume, likewise, puts the provider back
// everywhere.
func TestOperatorPauseHoldsInEveryProcess(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const key = "api.example.com"
		ctx := context.Background()
		records := checkpoint.NewMemoryStore(checkpoint.Config{})
		a := newRegistry(t, budget.RegistryConfig{Defaults: fast(), Records: records})
		b := newRegistry(t, budget.RegistryConfig{Defaults: fast(), Records: records})
		calls := 0
		do := func(reg *budget.Registry) error { return provider(reg, key).Do(ctx, nil, countingAttempt(&calls)) }
		if err := do(b); err != nil {
			t.Fatal(err)
		}
		if err := a.SetStatus(ctx, key, budget.StatusPaused, "key revoked"); err != nil {
			t.Fatal(err)
		}
		calls = 0
		err := do(a)
		if why, ok := budget.ReasonOf(err); !ok || why != forage.ReasonPaused || !why.SourcePressure() || calls != 0 || !strings.Contains(err.Error(), "key revoked") {
			t.Fatalf("in the process that paused it: %v with %d attempts; want paused (source pressure) naming why, none sent", err, calls)
		}
		time.Sleep(6 * time.Second)
		_ = do(b) // reads the record again in the background
		synctest.Wait()
		calls = 0
		if why, _ := budget.ReasonOf(do(b)); why != forage.ReasonPaused || calls != 0 {
			t.Fatalf("in another process after one read: %v with %d attempts; want paused, none sent", why, calls)
		}
		restarted := newRegistry(t, budget.RegistryConfig{Defaults: fast(), Records: records})
		if why, _ := budget.ReasonOf(do(restarted)); why != forage.ReasonPaused || calls != 0 {
			t.Fatalf("after a restart: %v with %d attempts; want paused, none sent", why, calls)
		}

		if err := b.SetStatus(ctx, key, budget.StatusActive, "new key"); err != nil {
			t.Fatal(err)
		}
		if err := do(b); err != nil || calls != 1 {
			t.Fatalf("resumed in its process: %v with %d attempts; want one success", err, calls)
		}
		time.Sleep(6 * time.Second)
		_ = do(a)
		synctest.Wait()
		if err := do(a); err != nil {
			t.Fatalf("resumed elsewhere, after one read: %v; want a success", err)
		}
	})
}

// TestSetStatusValidates: only "active" and "paused" are statuses, and a
// store that cannot save the status leaves the provider as it was.
func TestSetStatusValidates(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, budget.RegistryConfig{Defaults: fast()})
	if err := reg.SetStatus(context.Background(), "api.example.com", "stopped", ""); !errors.Is(err, budget.ErrInvalidConfig) || !strings.Contains(err.Error(), `"stopped"`) {
		t.Errorf("SetStatus(stopped) = %v; want an invalid-argument error naming it", err)
	}
	failing := &fakeRecords{failSave: errors.New("disk full")}
	reg = newRegistry(t, budget.RegistryConfig{Defaults: fast(), Records: failing})
	if err := reg.SetStatus(context.Background(), "api.example.com", budget.StatusPaused, "x"); err == nil {
		t.Fatal("SetStatus with a failing store = nil; want its error")
	}
	if err := provider(reg, "api.example.com").Do(context.Background(), nil, status(200, 0)); err != nil {
		t.Errorf("after a failed SetStatus: %v; want the provider in service", err)
	}
}

// holdingRecords is a record store that, once armed, holds the first save
// of a paused status after writing it, until released.
type holdingRecords struct {
	*checkpoint.LocalStore
	armed   atomic.Bool
	written chan struct{} // closed once the held save has written
	release chan struct{}
}

func (h *holdingRecords) SaveRecord(ctx context.Context, r forage.ProviderRecord) error {
	err := h.LocalStore.SaveRecord(ctx, r)
	if r.Status == budget.StatusPaused && h.armed.CompareAndSwap(true, false) {
		close(h.written)
		<-h.release
	}
	return err
}

// TestAPauseAndAResumeAtOnceAgreeWithTheStore: an operator's pause and
// another's resume of one provider at the same moment leave the provider
// in this process as the store holds it. The pause's save wrote first and
// was slow to return; the resume saved and applied meanwhile; the pause
// then applied: the store said active (every other process and every
// restart ran the provider), this process refused every call as paused,
// and the admin API had answered the resume "active" (found by a review).
func TestAPauseAndAResumeAtOnceAgreeWithTheStore(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const key = "api.example.com"
		ctx := context.Background()
		store := &holdingRecords{LocalStore: checkpoint.NewMemoryStore(checkpoint.Config{}), written: make(chan struct{}), release: make(chan struct{})}
		reg := newRegistry(t, budget.RegistryConfig{Defaults: fast(), Records: store})
		if _, err := reg.Get(key); err != nil {
			t.Fatal(err)
		}
		store.armed.Store(true)
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := reg.SetStatus(ctx, key, budget.StatusPaused, "maintenance"); err != nil {
				t.Error(err)
			}
		})
		<-store.written
		wg.Go(func() {
			if err := reg.SetStatus(ctx, key, budget.StatusActive, "done"); err != nil {
				t.Error(err)
			}
		})
		synctest.Wait() // the resume is done, or waits for the pause
		close(store.release)
		wg.Wait()
		saved, _, err := store.LoadRecord(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := reg.Lookup(key)
		if got := p.Snapshot().Status; got != saved.Status {
			t.Fatalf("after a pause and a resume at once: status %q here, %q in the store; want the same", got, saved.Status)
		}
	})
}
