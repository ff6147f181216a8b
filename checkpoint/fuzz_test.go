package checkpoint_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/checkpoint"
)

// FuzzKey: any string, used as a stream, a series, an owner and a reason,
// is either refused with ErrInvalid by every method (and the store still
// opens afterwards, unchanged), or accepted, and then every record keeps it
// through closing and reopening the file store. (Regression: Acquire
// accepted "binance/BTC\xff", after which the store refused to open.)
//
//	go test -run '^$' -fuzz FuzzKey -fuzztime 60s ./checkpoint/
func FuzzKey(f *testing.F) {
	for _, seed := range []string{
		"binance/BTC-USDT/1h", "binance/BTC\xff", "", "a\x00b", "a\nb", "\x1b[2J", "a\u0085b",
		"币安/BTC–USDT", "\ufffd", "\xed\xa0\x80", "line\u2028sep", strings.Repeat("s", checkpoint.MaxNameLen),
		strings.Repeat("s", checkpoint.MaxNameLen+1),
	} {
		f.Add(seed)
	}
	dir := shmOrTemp(f)
	f.Fuzz(func(t *testing.T, name string) {
		d, err := os.MkdirTemp(dir, "fuzzkey-*")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(d)
		if checkpoint.CheckName("name", name) != nil {
			refused(t, d, name)
		} else {
			roundTripsReopen(t, d, name)
		}
	})
}

// fuzzNow is the fuzz stores' clock.
func fuzzNow() time.Time { return t0 }

// refused checks that every method refuses name with ErrInvalid and that
// the store in d opens again afterwards with nothing in it.
func refused(t *testing.T, d, name string) {
	ctx := context.Background()
	s, err := checkpoint.OpenFileStore(d, checkpoint.Config{Now: fuzzNow})
	if err != nil {
		t.Fatal(err)
	}
	key := checkpoint.Key{Stream: name, Mode: checkpoint.CatchUp}
	lease := checkpoint.Lease{Stream: name, Owner: "o", Token: 1}
	errs := map[string]error{}
	_, errs["Acquire"] = s.Acquire(ctx, name, "o", time.Hour)
	_, errs["Acquire, owner"] = s.Acquire(ctx, "s", name, time.Hour)
	_, errs["Load"] = s.Load(ctx, key)
	_, errs["Commit"] = s.Commit(ctx, key, []byte("c"), 0, checkpoint.Lease{})
	_, errs["Renew"] = s.Renew(ctx, lease, time.Hour)
	errs["Release"] = s.Release(ctx, lease)
	_, errs["AddGap"] = s.AddGap(ctx, checkpoint.Gap{Key: key, Reason: "r"})
	_, errs["AddGap, reason"] = s.AddGap(ctx, checkpoint.Gap{Key: checkpoint.Key{Stream: "s", Mode: checkpoint.CatchUp}, Reason: name})
	errs["AddCoverage"] = s.AddCoverage(ctx, name, checkpoint.Range{Start: t0, End: t0.Add(time.Hour)})
	_, errs["Coverage"] = s.Coverage(ctx, name)
	errs["SaveRecord"] = s.SaveRecord(ctx, forage.ProviderRecord{Key: name})
	_, _, errs["LoadRecord"] = s.LoadRecord(ctx, name)
	if name != "" { // an empty Why or PauseReason means none
		errs["SaveRecord, why"] = s.SaveRecord(ctx, forage.ProviderRecord{Key: "p", Status: "paused", Why: name})
		errs["SaveRecord, reason"] = s.SaveRecord(ctx, forage.ProviderRecord{Key: "p", PauseReason: forage.Reason(name)})
	}
	for call, err := range errs {
		if !errors.Is(err, checkpoint.ErrInvalid) {
			t.Fatalf("%s(%q): %v, want ErrInvalid", call, name, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = checkpoint.OpenFileStore(d, checkpoint.Config{Now: fuzzNow})
	if err != nil {
		t.Fatalf("reopening after refusing %q: %v", name, err)
	}
	defer s.Close()
	if l, err := s.Acquire(ctx, "s", "o", time.Hour); err != nil || l.Token != 1 {
		t.Fatalf("Acquire after refusing %q: %+v, %v; want token 1 (nothing was granted)", name, l, err)
	}
}

// roundTripsReopen writes every kind of record under name in a store in
// d, reopens it, and checks that each came back with name unchanged.
func roundTripsReopen(t *testing.T, d, name string) {
	ctx := context.Background()
	s, err := checkpoint.OpenFileStore(d, checkpoint.Config{Now: fuzzNow})
	if err != nil {
		t.Fatal(err)
	}
	key := checkpoint.Key{Stream: name, Mode: checkpoint.SteadyState}
	r := checkpoint.Range{Start: t0, End: t0.Add(time.Hour)}
	l := must[checkpoint.Lease](t, "Acquire")(s.Acquire(ctx, name, name, time.Hour))
	must[checkpoint.Checkpoint](t, "Commit")(s.Commit(ctx, key, []byte(name), 0, l))
	must[checkpoint.Gap](t, "AddGap")(s.AddGap(ctx, checkpoint.Gap{Key: key, Reason: name, Range: r}))
	if err := s.AddCoverage(ctx, name, r); err != nil {
		t.Fatal(err)
	}
	rec := forage.ProviderRecord{Key: name, Status: name, Why: name, PausedUntil: t0, PauseReason: forage.Reason(name)}
	if err := s.SaveRecord(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = checkpoint.OpenFileStore(d, checkpoint.Config{Now: fuzzNow})
	if err != nil {
		t.Fatalf("reopening after accepting %q: %v", name, err)
	}
	defer s.Close()
	if got, ok, err := s.LoadRecord(ctx, name); err != nil || !ok || got.Key != name || got.Why != name || got.Status != name ||
		got.PauseReason != rec.PauseReason || !got.PausedUntil.Equal(t0) {
		t.Fatalf("LoadRecord(%q) after reopening: %+v, %v, %v", name, got, ok, err)
	}
	cp := must[checkpoint.Checkpoint](t, "Load")(s.Load(ctx, key))
	if cp.Version != 1 || !bytes.Equal(cp.Cursor, []byte(name)) {
		t.Fatalf("Load(%q) after reopening: %+v", name, cp)
	}
	gaps := must[[]checkpoint.Gap](t, "ListGaps")(s.ListGaps(ctx, checkpoint.GapQuery{Stream: name}))
	if len(gaps) != 1 || gaps[0].Key != key || gaps[0].Reason != name || gaps[0].Range != r {
		t.Fatalf("ListGaps(%q) after reopening: %+v", name, gaps)
	}
	cov := must[checkpoint.Coverage](t, "Coverage")(s.Coverage(ctx, name))
	if !cov.Covers(r) || len(cov.Ranges()) != 1 {
		t.Fatalf("Coverage(%q) after reopening: %v", name, cov)
	}
	// The lease came back under its owner's name: the holder is fenced by
	// name and token alike, so the restart's takeover supersedes it.
	l2 := must[checkpoint.Lease](t, "Acquire after reopening")(s.Acquire(ctx, name, "restart", time.Hour))
	if l2.Token != l.Token+1 {
		t.Fatalf("Acquire(%q) after reopening: token %d, want %d", name, l2.Token, l.Token+1)
	}
	if _, err := s.Commit(ctx, key, []byte("zombie"), 1, l); !errors.Is(err, checkpoint.ErrLeaseLost) {
		t.Fatalf("Commit(%q) with the old lease: %v, want ErrLeaseLost", name, err)
	}
}
