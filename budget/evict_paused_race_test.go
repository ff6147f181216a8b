package budget_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
)

// Callers meet again, at once, a host evicted while paused: the creator
// that took the kept state forgot it, then lost the race to insert to one
// that had found none, whose fresh provider, unpaused, was sent requests
// inside the pause (4-7 times in 2,000). Now the state is forgotten once
// the provider that took it is in.
func TestAPausedProviderRecreatedByManyAtOnceStaysPaused(t *testing.T) {
	reg, err := budget.NewRegistry(budget.RegistryConfig{MaxProviders: 4})
	if err != nil {
		t.Fatal(err)
	}
	lost := 0
	const iters = 2000
	for i := range iters {
		key := fmt.Sprintf("h%d", i)
		p, _ := reg.Get(key)
		_ = p.Do(context.Background(), nil, func(context.Context) forage.Outcome {
			return forage.Outcome{Status: 429, RetryAfter: time.Hour}
		})
		for j := range 6 {
			q, _ := reg.Get(fmt.Sprintf("f%d_%d", i, j))
			_ = q
		}
		if _, ok := reg.Lookup(key); ok {
			continue // not evicted this time
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		var got [8]budget.Provider
		for g := range got {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				got[g], _ = reg.Get(key)
			}()
		}
		close(start)
		wg.Wait()
		cur, _ := reg.Lookup(key)
		if cur != nil && !cur.Snapshot().PausedUntil.After(time.Now().Add(30*time.Minute)) {
			sent := false
			_ = cur.Do(context.Background(), nil, func(context.Context) forage.Outcome { sent = true; return forage.Outcome{Status: 200} })
			if sent {
				lost++
			}
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d hosts met again by concurrent callers within an hour's Retry-After came back unpaused and were sent a request", lost, iters)
	}
}
