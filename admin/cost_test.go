package admin_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/admin"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/schedule"
)

// allocated returns the bytes f allocated (the whole process's: the test
// that calls it does not run in parallel).
func allocated(f func()) uint64 {
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	f()
	runtime.ReadMemStats(&m1)
	return m1.TotalAlloc - m0.TotalAlloc
}

// TestAConnectorPageCostsThePage: a crawler's registry holds a provider
// per host it met (RegistryConfig.MaxProviders: 100,000 by default). One
// page of one connector, and each sample Handler.Run takes to chart the
// first 100 providers, snapshotted and sorted every provider of the
// registry (25 MB at 20,000 providers; 175 MB and 1.5 s at 100,000; found
// by a review). Now each costs its page.
func TestAConnectorPageCostsThePage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := newRegistry(t, budget.RegistryConfig{Defaults: quick()})
		const n = 20_000
		for i := range n {
			provider(reg, fmt.Sprintf("host%06d.example", i))
		}
		s, _ := newSched(t, schedule.Config{Budget: reg}, nil)
		h, err := admin.New(s, admin.Config{SampleEvery: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		page := allocated(func() { send(h, localRequest("GET", "/connectors?limit=1", nil)) })
		if page > 4<<20 {
			t.Errorf("GET /connectors?limit=1 over %d providers allocated %d MB; want it bounded by the page, not the registry", n, page>>20)
		}
		// GET /stats, GET /providers and the status page show a page of the
		// scheduler's providers: they snapshot that page of the registry, not
		// all of it (each took 35 MB at 20,000 providers).
		for _, path := range []string{"/stats", "/providers?limit=1", "/"} {
			if got := allocated(func() { send(h, localRequest("GET", path, nil)) }); got > 4<<20 {
				t.Errorf("GET %s over %d providers allocated %d MB; want it bounded by the page, not the registry", path, n, got>>20)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond) // one sample
		defer cancel()
		run := allocated(func() { _ = h.Run(ctx) })
		if run > 4<<20 {
			t.Errorf("one sample of Handler.Run (charts of the first 100 providers) over %d providers allocated %d MB", n, run>>20)
		}
	})
}
