package schedule_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/schedule"
)

// hung is a JobStore whose calls, while it hangs, block until their ctx
// ends or the store answers again: a database whose connection went dead
// without a reset, so a query waits for TCP to give up (many minutes).
type hung struct {
	schedule.JobStore
	on      atomic.Bool
	mu      sync.Mutex
	answers chan struct{} // closed when the store answers again
}

func newHung(s schedule.JobStore) *hung { return &hung{JobStore: s, answers: make(chan struct{})} }

func (h *hung) hang(v bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.on.Store(v)
	if !v {
		close(h.answers)
		h.answers = make(chan struct{})
	}
}

func (h *hung) wait(ctx context.Context) error {
	if !h.on.Load() {
		return nil
	}
	h.mu.Lock()
	answers := h.answers
	h.mu.Unlock()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-answers:
		return nil
	}
}

func (h *hung) Get(ctx context.Context, id int64) (schedule.Job, error) {
	if err := h.wait(ctx); err != nil {
		return schedule.Job{}, err
	}
	return h.JobStore.Get(ctx, id)
}

func (h *hung) Update(ctx context.Context, j schedule.Job) (schedule.Job, error) {
	if err := h.wait(ctx); err != nil {
		return schedule.Job{}, err
	}
	return h.JobStore.Update(ctx, j)
}

func (h *hung) Claim(ctx context.Context, now time.Time, owner string, ttl time.Duration, limit int, f schedule.ClaimFilter) ([]schedule.Job, error) {
	if err := h.wait(ctx); err != nil {
		return nil, err
	}
	return h.JobStore.Claim(ctx, now, owner, ttl, limit, f)
}

// TestAHungStoreStopsARunBeforeItsLeaseEnds: scheduler A runs a job and
// its job store stops answering without failing (its calls hang); B,
// which reaches the store, rescues the job once A's lease ends. A's run is
// stopped before its lease ends, as it is when the store fails: never two
// runs at once. A's renewal waited on the store, and the check that stops
// a run whose lease could not be renewed came only after it: A ran the job
// alongside B's run until the store answered.
func TestAHungStoreStopsARunBeforeItsLeaseEnds(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		mem := schedule.NewMemoryJobStore()
		viewA := newHung(mem)
		neverTwiceAtOnce(t, mem, viewA, func() { viewA.hang(true) }, func() { viewA.hang(false) })
	})
}
