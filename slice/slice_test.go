package slice_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
)

func TestNewRejectsInvalidConfig(t *testing.T) {
	t.Parallel()
	g := newRig(1, 1)
	valid := func() slice.Config[rec] {
		return slice.Config[rec]{Stream: stream, Mode: checkpoint.CatchUp, Store: g.store, Provider: g.prov, Source: g.src, Sink: g.sink}
	}
	for _, tc := range []struct {
		name string
		edit func(*slice.Config[rec])
		want string
	}{
		{"no stream", func(c *slice.Config[rec]) { c.Stream = "" }, "Config.Stream must name the stream"},
		{"zero mode", func(c *slice.Config[rec]) { c.Mode = 0 }, "Config.Mode must be checkpoint.CatchUp or checkpoint.SteadyState (got Mode(0))"},
		{"bad mode", func(c *slice.Config[rec]) { c.Mode = 7 }, "(got Mode(7))"},
		{"negative ttl", func(c *slice.Config[rec]) { c.LeaseTTL = -time.Second }, "Config.LeaseTTL must be >= 0 (got -1s)"},
		{"negative batch", func(c *slice.Config[rec]) { c.GapBatch = -1 }, "Config.GapBatch must be >= 0 (got -1)"},
		{"prefetch below off", func(c *slice.Config[rec]) { c.Prefetch = -2 }, "Config.Prefetch must be in [-1 (NoPrefetch), 1024] (got -2)"},
		{"absurd prefetch", func(c *slice.Config[rec]) { c.Prefetch = 1025 }, "(got 1025)"},
		{"negative max batch", func(c *slice.Config[rec]) { c.MaxBatch = -1 }, "Config.MaxBatch must be >= 0 (got -1)"},
		{"no store", func(c *slice.Config[rec]) { c.Store = nil }, "Config.Store must be set: use checkpoint.NewMemoryStore"},
		{"no provider", func(c *slice.Config[rec]) { c.Provider = nil }, "Config.Provider must be set: use budget.NewLocal"},
		{"no source", func(c *slice.Config[rec]) { c.Source = nil }, "Config.Source must be set: implement slice.Source"},
		{"no sink", func(c *slice.Config[rec]) { c.Sink = nil }, "Config.Sink must be set: implement slice.Sink"},
		{"two sinks", func(c *slice.Config[rec]) { c.TxSink = &txSink{} }, "Config.TxSink must be nil when Config.Sink is set: set exactly one"},
		// Typed nils: each compared unequal to nil and panicked in Run.
		{"typed nil provider", func(c *slice.Config[rec]) { c.Provider = (*fakeProvider)(nil) }, "Config.Provider must be set"},
		{"nil sink func", func(c *slice.Config[rec]) { c.Sink = slice.SinkFunc[rec](nil) }, "Config.Sink must be set"},
		{"typed nil store", func(c *slice.Config[rec]) { c.Store = (*checkpoint.LocalStore)(nil) }, "Config.Store must be set"},
		// Names no store accepts: the run failed at its first lease, or
		// after its first commit, at the coverage.
		{"stream with a control character", func(c *slice.Config[rec]) { c.Stream = "btc\n1m" }, `Config.Stream must not contain control characters (U+000A at byte 3) (got "btc\n1m")`},
		{"owner with a control character", func(c *slice.Config[rec]) { c.Owner = "host\x1b[2J" }, "Config.Owner must not contain control characters"},
		{"series with NUL", func(c *slice.Config[rec]) { c.Series = "x\x00" }, "Config.Series must not contain control characters"},
		{"stream not UTF-8", func(c *slice.Config[rec]) { c.Stream = "\xff" }, "Config.Stream must be valid UTF-8"},
	} {
		cfg := valid()
		tc.edit(&cfg)
		_, err := slice.New(cfg)
		if !errors.Is(err, slice.ErrInvalidConfig) {
			t.Errorf("%s: New error = %v, want one wrapping ErrInvalidConfig", tc.name, err)
			continue
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "slice: ") || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: New error = %q, want it to start with \"slice: \" and contain %q", tc.name, msg, tc.want)
		}
	}
	if _, err := slice.New(valid()); err != nil {
		t.Fatalf("New(valid config) = %v", err)
	}
}

func TestNewDefaultsOwner(t *testing.T) {
	t.Parallel()
	g := newRig(1, 1)
	a, b := g.runner(t, checkpoint.CatchUp), g.runner(t, checkpoint.CatchUp)
	if oa, ob := slice.OwnerForTest(a), slice.OwnerForTest(b); oa == "" || oa == ob {
		t.Fatalf("default owners %q and %q: want non-empty and distinct", oa, ob)
	}
	c := g.runner(t, checkpoint.SteadyState, func(c *slice.Config[rec]) { c.Owner = "worker-7" })
	if o := slice.OwnerForTest(c); o != "worker-7" {
		t.Fatalf("owner %q, want the configured worker-7", o)
	}
	if want := (checkpoint.Key{Stream: stream, Mode: checkpoint.SteadyState}); slice.KeyForTest(c) != want {
		t.Fatalf("key %v, want %v", slice.KeyForTest(c), want)
	}
}
