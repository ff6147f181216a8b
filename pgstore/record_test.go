package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/budget/budgettest"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/pgstore"
	"github.com/jackc/pgx/v5"
)

// TestPauseSurvivesRestart: with providers shared through PostgreSQL
// (budget.Config.Shares) a provider's pause lives in the shared document,
// so it needs no budget.RecordStore: process A is told "429, Retry-After:
// 120"; process B, started after it on the same schema (a new store and
// registry), sends nothing before the pause ends. Its call with two seconds to live stops at once, no attempt made
// (issue 12 item 5: the file store had to learn this).
func TestPauseSurvivesRestart(t *testing.T) {
	t.Parallel()
	schema := freshSchema(t)
	open := func() *budget.Registry {
		s, err := pgstore.New(testPool(t), pgstore.Config{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		reg, err := budget.NewRegistry(budget.RegistryConfig{Defaults: budget.Config{Shares: s}})
		if err != nil {
			t.Fatal(err)
		}
		return reg
	}
	a := open()
	_ = provider(a, "api.example.com").Do(context.Background(), nil, func(context.Context) forage.Outcome {
		return forage.Outcome{Status: 429, RetryAfter: 120 * time.Second}
	})

	b := open()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start, calls := time.Now(), 0
	err := provider(b, "api.example.com").Do(ctx, nil, func(context.Context) forage.Outcome {
		calls++
		return forage.Outcome{Status: 200}
	})
	if err == nil || calls != 0 {
		t.Fatalf("process B: Do = %v with %d attempts, want a stop and none during the pause", err, calls)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		// Far under the 30 s deadline and the 2 min pause; the store's
		// round trips (the record, on a loaded machine) count in it.
		t.Fatalf("process B waited %v to learn of a pause that outlasts its deadline", waited)
	}
}

// TestRecordStore runs the budget.RecordStore contract against PostgreSQL.
func TestRecordStore(t *testing.T) {
	t.Parallel()
	testPool(t) // skip or fail once, up front
	budgettest.RunRecordStore(t, func(t *testing.T) budget.RecordStore {
		return newStore(t, nil)
	})
}

// TestShareStore runs the budget.ShareStore contract against PostgreSQL.
func TestShareStore(t *testing.T) {
	t.Parallel()
	testPool(t) // skip or fail once, up front
	budgettest.RunShareStore(t, func(t *testing.T) budget.ShareStore {
		return newStore(t, nil)
	})
}

// TestRecordAcrossProcesses: the PostgreSQL RecordStore keeps a provider's
// record across stores (processes): a pause and its reason, never
// shortened (nor its reason changed by a shorter save), and the learned
// rate; a provider on a new registry with it as its RecordStore starts at
// that rate and ends a call at once, banned (the reason saved, not
// "throttled"), with the time to resume (rather than waiting past
// MaxWait); an invalid key or reason is refused.
func TestRecordAcrossProcesses(t *testing.T) {
	t.Parallel()
	schema := freshSchema(t)
	ctx := context.Background()
	open := func() *pgstore.Store {
		s, err := pgstore.New(testPool(t), pgstore.Config{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := open(), open()
	until := time.Now().Add(2 * time.Minute).Truncate(time.Microsecond)
	rec := forage.ProviderRecord{Key: "api.example.com", Rate: 7, Ceiling: 9, PausedUntil: until, PauseReason: forage.ReasonThrottled, Updated: time.Now()}
	if err := a.SaveRecord(ctx, rec); err != nil {
		t.Fatal(err)
	}
	rec.PauseReason = forage.ReasonBanned // an equal end: the new reason
	if err := a.SaveRecord(ctx, rec); err != nil {
		t.Fatal(err)
	}
	shorter := rec
	shorter.PausedUntil, shorter.PauseReason = until.Add(-time.Minute), forage.ReasonThrottled
	if err := a.SaveRecord(ctx, shorter); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := b.LoadRecord(ctx, "api.example.com"); err != nil || !ok || !got.PausedUntil.Equal(until) || got.PauseReason != forage.ReasonBanned || got.Rate != 7 {
		t.Fatalf("LoadRecord = %+v, %v, %v; want rate 7, banned until %v (a shorter save changes neither)", got, ok, err, until)
	}
	if _, _, err := b.LoadRecord(ctx, "bad\xff"); !errors.Is(err, checkpoint.ErrInvalid) {
		t.Fatalf("LoadRecord of an invalid key: %v, want ErrInvalid", err)
	}
	if err := a.SaveRecord(ctx, forage.ProviderRecord{Key: "p", PausedUntil: until, PauseReason: "bad\nreason"}); !errors.Is(err, checkpoint.ErrInvalid) {
		t.Fatalf("SaveRecord with an invalid reason: %v, want ErrInvalid", err)
	}
	reg, err := budget.NewRegistry(budget.RegistryConfig{Records: b})
	if err != nil {
		t.Fatal(err)
	}
	start, calls := time.Now(), 0
	p := provider(reg, "api.example.com")
	err = p.Do(ctx, nil, func(context.Context) forage.Outcome {
		calls++
		return forage.Outcome{Status: 200}
	})
	var be *budget.Error
	if !errors.As(err, &be) || be.Reason != forage.ReasonBanned || !be.Until.Equal(until) || calls != 0 {
		t.Fatalf("Do = %v with %d attempts; want banned until %v, none sent", err, calls, until)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("Do waited %v for a pause longer than MaxWait (1 min)", waited)
	}
	if s := p.Snapshot(); s.Rate != 7 || s.Ceiling != 9 {
		t.Fatalf("restarted at %v/s (ceiling %v), want the learned 7/s (ceiling 9)", s.Rate, s.Ceiling)
	}
}

// TestMigrationMovesPauses: migration 009 moves the pauses 006/007 kept
// into the provider records: a row with a reason keeps it, a row saved
// before 007 reads with no reason (as throttled), and a record that
// already holds a later pause keeps it.
func TestMigrationMovesPauses(t *testing.T) {
	t.Parallel()
	s := newStore(t, nil)
	ctx := context.Background()
	until := time.Now().Add(2 * time.Minute).Truncate(time.Microsecond)
	later := forage.ProviderRecord{Key: "later.example.com", Rate: 3, PausedUntil: until.Add(time.Hour), PauseReason: forage.ReasonThrottled}
	if err := s.SaveRecord(ctx, later); err != nil {
		t.Fatal(err)
	}
	pauses := pgx.Identifier{s.Schema(), "pauses"}.Sanitize()
	for _, q := range []string{
		"INSERT INTO " + pauses + " (provider, until, reason) VALUES ('api.example.com', $1, 'banned')",
		"INSERT INTO " + pauses + " (provider, until) VALUES ('old.example.com', $1)", // as 006 wrote it
		"INSERT INTO " + pauses + " (provider, until, reason) VALUES ('later.example.com', $1, 'banned')",
		// Run 009 again, as a schema at version 8 would.
		"DELETE FROM " + pgx.Identifier{s.Schema(), "migrations"}.Sanitize() + " WHERE version >= 9 AND $1::timestamptz IS NOT NULL",
	} {
		if _, err := s.Pool().Exec(ctx, q, until); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]forage.ProviderRecord{
		"api.example.com":   {PausedUntil: until, PauseReason: forage.ReasonBanned},
		"old.example.com":   {PausedUntil: until},
		"later.example.com": later,
	} {
		got, ok, err := s.LoadRecord(ctx, key)
		if err != nil || !ok || !got.PausedUntil.Equal(want.PausedUntil) || got.PauseReason != want.PauseReason || got.Rate != want.Rate {
			t.Errorf("%s after migration 009: %+v, %v, %v; want %+v", key, got, ok, err, want)
		}
	}
	reg, err := budget.NewRegistry(budget.RegistryConfig{Records: s})
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]forage.Reason{"api.example.com": forage.ReasonBanned, "old.example.com": forage.ReasonThrottled} {
		err := provider(reg, key).Do(ctx, nil, func(context.Context) forage.Outcome {
			panic("called during the pause")
		})
		var be *budget.Error
		if !errors.As(err, &be) || be.Reason != want || !be.Until.Equal(until) {
			t.Errorf("%s: Do = %v; want %s until %v", key, err, want, until)
		}
	}
}

// TestAHandEditedSpentColumnStallsNobody: a provider record whose spent
// column is not an object of times (a hand edit, another program) reads as
// none: the provider is built, and its next save writes a good one. It
// failed LoadRecord, so every Registry.Get of the key failed until the row
// was fixed by hand.
func TestAHandEditedSpentColumnStallsNobody(t *testing.T) {
	t.Parallel()
	s := newStore(t, nil)
	ctx := context.Background()
	table := pgx.Identifier{s.Schema(), "provider_records"}.Sanitize()
	for i, bad := range []string{`{"3/1h0m0s":"soon"}`, `{"k":5}`, `[]`, `"x"`, `null`} {
		key := "api" + string(rune('a'+i))
		if err := s.SaveRecord(ctx, forage.ProviderRecord{Key: key, Rate: 2}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Pool().Exec(ctx, "UPDATE "+table+" SET spent = $1::jsonb WHERE key = $2", bad, key); err != nil {
			t.Fatal(err)
		}
		r, ok, err := s.LoadRecord(ctx, key)
		if err != nil || !ok || r.Rate != 2 || len(r.Spent) != 0 {
			t.Fatalf("spent %s: LoadRecord = %+v, %v, %v; want the record, with no spent times", bad, r, ok, err)
		}
		if _, err := budget.NewLocal(key, budget.Config{Records: s}); err != nil {
			t.Fatalf("spent %s: NewLocal: %v", bad, err)
		}
	}
}
