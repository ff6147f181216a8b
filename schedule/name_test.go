package schedule_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/schedule"
	"pgregory.net/rapid"
)

// badNames break the name rule every store applies: invalid UTF-8, NUL,
// an escape sequence, a newline, and one byte too many.
var badNames = []string{
	"binance/BTC\xff", "p\x00", "a\x1b[31mred", "two\nlines", "c1\u0085", strings.Repeat("n", checkpoint.MaxNameLen+1),
}

// TestUpsertRefusesBadNames (regression: job names bypassed the name
// rule): with the memory store Upsert took "binance/BTC\xff" and names
// with NUL or ESC, which the PostgreSQL store refuses. Now it refuses them
// with ErrInvalid naming the field (the admin API's side of it is tested
// in package admin).
func TestUpsertRefusesBadNames(t *testing.T) {
	t.Parallel()
	s, _ := newSched(t, schedule.Config{}, nil)
	ctx := context.Background()
	for i, bad := range badNames {
		for _, spec := range []schedule.Spec{
			{Provider: bad, Kind: schedule.KindBackfill, Stream: "s"},
			{Provider: "p", Kind: schedule.KindBackfill, Stream: bad},
		} {
			field := "Spec.Provider"
			if spec.Provider == "p" {
				field = "Spec.Stream"
			}
			_, err := s.Upsert(ctx, spec)
			if !errors.Is(err, schedule.ErrInvalid) || !strings.Contains(err.Error(), field) || !strings.HasPrefix(err.Error(), "schedule: ") {
				t.Errorf("%d: Upsert(%q, %q) = %v, want ErrInvalid naming %s", i, spec.Provider, spec.Stream, err, field)
			}
		}
	}
	if jobs, _ := s.Store().List(ctx, schedule.Query{}); len(jobs) != 0 {
		t.Fatalf("%d jobs stored after only invalid upserts", len(jobs))
	}
	// What the rule allows stays allowed: spaces, non-ASCII, U+FFFD, 1024 bytes.
	for _, good := range []string{"börse/BTC €", "a b", "\uFFFD", strings.Repeat("n", checkpoint.MaxNameLen)} {
		upsert(t, s, t0, schedule.Spec{Provider: good, Kind: schedule.KindBackfill, Stream: good})
	}
}

// TestPropertyJobNamesAgreeWithCheckpoint: the scheduler accepts a
// provider or stream name exactly when checkpoint.CheckName does.
func TestPropertyJobNamesAgreeWithCheckpoint(t *testing.T) {
	t.Parallel()
	s, _ := newSched(t, schedule.Config{}, nil)
	rapid.Check(t, func(rt *rapid.T) {
		name := rapid.OneOf(rapid.String(), rapid.StringMatching(`[a-z/\x00-\x1f\x7f\x{80}-\x{9f}]{0,8}`),
			rapid.Custom(func(rt *rapid.T) string { return string(rapid.SliceOf(rapid.Byte()).Draw(rt, "bytes")) })).Draw(rt, "name")
		want := checkpoint.CheckName("x", name) == nil
		_, err := s.Upsert(context.Background(), schedule.Spec{Provider: "p", Kind: schedule.KindBackfill, Stream: name, NextRun: t0})
		if got := err == nil; got != want || (err != nil && !errors.Is(err, schedule.ErrInvalid)) {
			rt.Fatalf("Upsert(stream %q) = %v; CheckName accepts it: %v", name, err, want)
		}
	})
}

// TestConfigOwnerName: Config.Owner becomes part of every lease owner a
// store holds, so it meets the same rule.
func TestConfigOwnerName(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"host\n", "h\xff", strings.Repeat("o", checkpoint.MaxNameLen)} {
		_, err := schedule.New(schedule.Config{Owner: bad}, schedule.NewMemoryJobStore(), idle)
		if !errors.Is(err, schedule.ErrInvalidConfig) || !strings.Contains(err.Error(), "Config.Owner") {
			t.Errorf("New(Owner %q) = %v, want ErrInvalidConfig naming Config.Owner", bad, err)
		}
	}
	if _, err := schedule.New(schedule.Config{Owner: "host-1 ü"}, schedule.NewMemoryJobStore(), idle); err != nil {
		t.Fatalf("New(Owner %q): %v", "host-1 ü", err)
	}
}
