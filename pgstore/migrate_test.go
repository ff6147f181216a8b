package pgstore_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/forage-go/forage/pgstore"
)

// TestMigrateIsIdempotentAndConcurrent: many processes migrating one
// schema at once, and again later, all succeed and apply each migration
// exactly once.
func TestMigrateIsIdempotentAndConcurrent(t *testing.T) {
	t.Parallel()
	schema := freshSchema(t)
	ctx := t.Context()
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			s, err := pgstore.New(testPool(t), pgstore.Config{Schema: schema})
			if err != nil {
				t.Error(err)
				return
			}
			if err := s.Migrate(ctx); err != nil {
				t.Errorf("migrator %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	s, err := pgstore.New(testPool(t), pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate again: %v", err)
	}
	rows, err := s.Pool().Query(ctx, `SELECT version, count(*) FROM "`+schema+`".migrations GROUP BY version ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	want := int32(1)
	for rows.Next() {
		var v int32
		var n int64
		if err := rows.Scan(&v, &n); err != nil {
			t.Fatal(err)
		}
		if v != want || n != 1 {
			t.Fatalf("migration %d recorded %d times (want migration %d once)", v, n, want)
		}
		want++
	}
	if want < 3 {
		t.Fatalf("only %d migrations recorded, want at least 2", want-1)
	}
}

// TestMigrateRefusesNewerSchema: a schema migrated by a newer pgstore is
// left alone, with an error saying so.
func TestMigrateRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	s := newStore(t, nil)
	ctx := t.Context()
	if _, err := s.Pool().Exec(ctx, `INSERT INTO "`+s.Schema()+`".migrations (version, name) VALUES (9999, 'future')`); err != nil {
		t.Fatal(err)
	}
	err := s.Migrate(ctx)
	if err == nil || !strings.Contains(err.Error(), "newer") || !strings.Contains(err.Error(), s.Schema()) {
		t.Fatalf("Migrate over a newer schema: %v, want an error naming the schema and saying it is newer", err)
	}
}
