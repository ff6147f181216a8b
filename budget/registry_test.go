package budget_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/gcra"
	"pgregory.net/rapid"
)

func newRegistry(t tb, cfg budget.RegistryConfig) *budget.Registry {
	t.Helper()
	r, err := budget.NewRegistry(cfg)
	if err != nil {
		t.Fatalf("NewRegistry: %v", err)
	}
	return r
}

// TestRegistryOneProviderPerKey: concurrent callers asking for one key all
// get the same Provider, and the registry holds exactly one per key.
func TestRegistryOneProviderPerKey(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		keys := rapid.SliceOfNDistinct(rapid.StringMatching(`[a-z]{1,6}`), 1, 8, rapid.ID).Draw(rt, "keys")
		callers := rapid.IntRange(2, 16).Draw(rt, "callers")
		reg := newRegistry(rt, budget.RegistryConfig{Shards: rapid.IntRange(1, 8).Draw(rt, "shards")})
		got := make([][]budget.Provider, callers)
		var wg sync.WaitGroup
		for c := range callers {
			wg.Go(func() {
				for _, k := range keys {
					got[c] = append(got[c], provider(reg, k))
				}
			})
		}
		wg.Wait()
		for c := 1; c < callers; c++ {
			for i := range keys {
				if got[c][i] != got[0][i] {
					rt.Fatalf("caller %d got a different provider for %q", c, keys[i])
				}
			}
		}
		if reg.Len() != len(keys) {
			rt.Fatalf("registry holds %d providers for %d keys", reg.Len(), len(keys))
		}
	})
}

// TestRegistryOverrides: a key with an override gets its config (a known
// limit), the others the defaults.
func TestRegistryOverrides(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, budget.RegistryConfig{
		Defaults:  budget.Config{Adaptive: aimd.Config{Initial: 2}},
		Overrides: map[string]budget.Config{"binance": {Adaptive: aimd.Config{Initial: 20}}},
	})
	if got := provider(reg, "binance").Snapshot().Rate; got != 20 {
		t.Fatalf("override rate %v, want 20", got)
	}
	if got := provider(reg, "kraken").Snapshot().Rate; got != 2 {
		t.Fatalf("default rate %v, want 2", got)
	}
}

// TestRegistryRejectsBadConfig names the field at fault.
func TestRegistryRejectsBadConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  budget.RegistryConfig
		want string
	}{
		{budget.RegistryConfig{IdleTTL: -1}, "RegistryConfig.IdleTTL"},
		{budget.RegistryConfig{MaxProviders: -1}, "RegistryConfig.MaxProviders"},
		{budget.RegistryConfig{Defaults: budget.Config{MaxInFlight: -1}}, "budget: RegistryConfig.Defaults.MaxInFlight must be >= 0 (got -1)"},
		{budget.RegistryConfig{Overrides: map[string]budget.Config{"x": {Limits: []budget.Limit{{Count: 0, Per: time.Second}}}}}, `Overrides["x"]`},
		{budget.RegistryConfig{Defaults: budget.Config{Adaptive: aimd.Config{Decrease: 2}}}, "Decrease"},
	} {
		_, err := budget.NewRegistry(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewRegistry(%+v) = %v, want an error naming %s", tc.cfg, err, tc.want)
		}
		if err != nil && !errors.Is(err, budget.ErrInvalidConfig) {
			t.Errorf("%v wraps no ErrInvalidConfig", err)
		}
	}
}

// TestRegistryEvictsIdleNeverBusy: EvictAt drops providers idle past the TTL
// but never one with a call in flight, and a caller holding an evicted
// handle is redirected to the key's new provider.
func TestRegistryEvictsIdleNeverBusy(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, budget.RegistryConfig{IdleTTL: time.Minute, Defaults: fast()})
	idle := provider(reg, "idle")
	busy := provider(reg, "busy")
	release := make(chan struct{})
	started := make(chan struct{})
	go func() {
		_ = busy.Do(context.Background(), nil, func(context.Context) forage.Outcome {
			close(started)
			<-release
			return forage.Outcome{Status: 200}
		})
	}()
	<-started
	if n := reg.EvictAt(time.Now().Add(2 * time.Minute)); n != 1 {
		t.Fatalf("evicted %d, want 1 (the idle one)", n)
	}
	if _, ok := reg.Lookup("busy"); !ok {
		t.Fatal("the busy provider was evicted")
	}
	if _, ok := reg.Lookup("idle"); ok {
		t.Fatal("the idle provider was kept")
	}
	close(release)
	// The stale handle still works and recreates the key's provider.
	if err := idle.Do(context.Background(), nil, status(200, 0)); err != nil {
		t.Fatalf("stale handle: %v", err)
	}
	fresh, ok := reg.Lookup("idle")
	if !ok || fresh.Snapshot().Requests != 1 {
		t.Fatal("the stale handle's call did not reach the recreated provider")
	}
}

// TestRegistryCap: past MaxProviders the least recently used idle providers
// are evicted.
func TestRegistryCap(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, budget.RegistryConfig{MaxProviders: 100})
	for i := range 1000 {
		provider(reg, fmt.Sprint("host-", i))
	}
	if n := reg.Len(); n > 100 {
		t.Fatalf("registry holds %d providers, cap 100", n)
	}
	if _, ok := reg.Lookup("host-999"); !ok {
		t.Fatal("the newest provider was evicted")
	}
}

// TestRegistrySnapshot lists every provider, sorted by key.
func TestRegistrySnapshot(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, budget.RegistryConfig{Defaults: fast()})
	for _, k := range []string{"b", "a", "c"} {
		_ = provider(reg, k).Do(context.Background(), nil, status(200, 0))
	}
	snaps, _ := reg.SnapshotPage("", math.MaxInt)
	if len(snaps) != 3 || snaps[0].Key != "a" || snaps[2].Key != "c" {
		t.Fatalf("snapshot %+v, want a, b, c", snaps)
	}
	for _, s := range snaps {
		if s.Requests != 1 || s.OK != 1 || s.Breaker != "closed" {
			t.Fatalf("snapshot of %s: %+v", s.Key, s)
		}
	}
}

// TestRegistryKeepsPausedProviders: a provider under a pause (a ban, a long
// Retry-After) is not evicted when idle, or the next call would forget it.
func TestRegistryKeepsPausedProviders(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		cfg := fast()
		cfg.MaxWait = time.Minute
		reg := newRegistry(t, budget.RegistryConfig{IdleTTL: time.Minute, Defaults: cfg})
		_ = provider(reg, "banned").Do(context.Background(), nil, status(418, time.Hour))
		if n := reg.EvictAt(time.Now().Add(10 * time.Minute)); n != 0 {
			t.Fatalf("evicted %d providers, want the paused one kept", n)
		}
		if n := reg.EvictAt(time.Now().Add(2 * time.Hour)); n != 1 {
			t.Fatalf("evicted %d after the pause ended, want 1", n)
		}
	})
}

// TestLookupOfAMissingKeyIsNil: a missing key gives a nil interface, not a
// typed nil that compares unequal to nil (staticcheck SA4023 found a host
// that checked p != nil and then called it).
func TestLookupOfAMissingKeyIsNil(t *testing.T) {
	t.Parallel()
	reg, err := budget.NewRegistry(budget.RegistryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := reg.Lookup("missing"); ok || p != nil {
		t.Fatalf("Lookup(missing) = %v, %v; want a nil Provider and false", p, ok)
	}
}

// TestRegistryRejectsSharedDefaultsPacer: a Pacer in RegistryConfig.Defaults
// would be shared silently by every key, so NewRegistry refuses it and points
// at Overrides and Shares; a Pacer in one key's override paces that key only and is kept.
func TestRegistryRejectsSharedDefaultsPacer(t *testing.T) {
	t.Parallel()
	shared := must(gcra.New(gcra.Config{Rate: 10}))
	_, err := budget.NewRegistry(budget.RegistryConfig{Defaults: budget.Config{Pacer: shared}})
	if err == nil || !errors.Is(err, budget.ErrInvalidConfig) ||
		!strings.Contains(err.Error(), "RegistryConfig.Defaults.Pacer") ||
		!strings.Contains(err.Error(), "Overrides") || !strings.Contains(err.Error(), "Shares") {
		t.Fatalf("NewRegistry with Defaults.Pacer = %v, want ErrInvalidConfig naming RegistryConfig.Defaults.Pacer, Overrides and Shares", err)
	}
	reg, err := budget.NewRegistry(budget.RegistryConfig{
		Overrides: map[string]budget.Config{"one": {Pacer: shared}},
	})
	if err != nil {
		t.Fatalf("NewRegistry with Overrides[one].Pacer: %v, want nil", err)
	}
	if _, err := reg.Get("one"); err != nil {
		t.Fatalf("Get(one): %v", err)
	}
}
