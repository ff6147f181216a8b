package budget_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
)

// TestATransportInsideItsProvidersDoIsThatAttempt: a Source whose client
// goes through a Transport on the registry its runner's Provider comes from
// (slice and schedule call Fetch inside Provider.Do) sends each request as
// the attempt of the Do it is inside: it is booked, paced and counted once.
// The Transport ran a second Do of the same provider inside the first: each
// request took two pacing slots and two units of a known limit (half the
// provider's pace), was counted twice, and with MaxInFlight 1 the inner call
// waited for the slot the outer one held, until the caller's deadline.
func TestATransportInsideItsProvidersDoIsThatAttempt(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		cfg := fast()
		cfg.MaxInFlight = 1
		cfg.Limits = []budget.Limit{{Count: 2, Per: time.Minute}}
		reg := newRegistry(t, budget.RegistryConfig{Defaults: cfg})
		base := &scripted{codes: []int{200}}
		client := &http.Client{Transport: budget.NewTransport(reg, base)}
		p, err := reg.Get("api.example.com")
		if err != nil {
			t.Fatal(err)
		}
		fetch := func(ctx context.Context) forage.Outcome { // a Source's Fetch
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.example.com/v1/items", nil)
			resp, err := client.Do(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			return forage.FromHTTP(resp, err)
		}
		for i := range 2 { // the known limit admits one each 30 s
			ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
			err := p.Do(ctx, nil, fetch)
			cancel()
			if err != nil {
				t.Fatalf("call %d: %v", i+1, err)
			}
		}
		if n, got := len(base.seen), p.Snapshot().Requests; n != 2 || got != 2 {
			t.Fatalf("the provider was sent %d requests and counted %d, want 2 and 2", n, got)
		}
	})
}

// TestASecondRequestOfAnAttemptIsACallOfItsOwn: a Fetch that sends two
// requests through the Transport inside one attempt (a lookup, then the
// page) sends the first as the attempt and the second through a Do of its
// own: every request the provider is sent is booked against its known
// limits and counted (sent as the attempt too, the second was counted by
// no known limit: a limit of 10 a minute let 20 through).
func TestASecondRequestOfAnAttemptIsACallOfItsOwn(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		cfg := fast()
		cfg.Limits = []budget.Limit{{Count: 10, Per: time.Minute}}
		reg := newRegistry(t, budget.RegistryConfig{Defaults: cfg})
		base := &scripted{codes: []int{200}}
		client := &http.Client{Transport: budget.NewTransport(reg, base)}
		p, err := reg.Get("api.example.com")
		if err != nil {
			t.Fatal(err)
		}
		get := func(ctx context.Context, path string) forage.Outcome {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.example.com"+path, nil)
			resp, err := client.Do(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			return forage.FromHTTP(resp, err)
		}
		fetch := func(ctx context.Context) forage.Outcome {
			if o := get(ctx, "/v1/cursor"); o.Class() != forage.Success {
				return o
			}
			return get(ctx, "/v1/items")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
		defer cancel()
		calls := 0
		for ; ctx.Err() == nil; calls++ {
			if err := p.Do(ctx, nil, fetch); err != nil {
				break
			}
		}
		if n, got := len(base.seen), p.Snapshot().Requests; n > 10 || uint64(n) != got {
			t.Fatalf("%d calls: the provider was sent %d requests within 50 s and counted %d; want at most the known limit's 10, each counted", calls, n, got)
		}
	})
}
