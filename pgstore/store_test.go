package pgstore_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/checkpoint/checkpointtest"
	"github.com/forage-go/forage/pgstore"
)

// TestStore runs the whole checkpoint contract against PostgreSQL, each
// store in a schema of its own.
func TestStore(t *testing.T) {
	t.Parallel()
	testPool(t) // skip or fail once, up front
	checkpointtest.Run(t, func(t *testing.T, now func() time.Time) checkpoint.Store {
		return newStore(t, now)
	})
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	for _, schema := range []string{"1abc", "a-b", "a b", `x"y`, "é", strings.Repeat("s", 64)} {
		_, err := pgstore.New(nil, pgstore.Config{Schema: schema})
		if !errors.Is(err, pgstore.ErrInvalidConfig) {
			t.Errorf("New(nil, Schema %q): %v, want ErrInvalidConfig", schema, err)
		}
	}
	// A valid schema with a nil pool still fails, saying what to pass.
	_, err := pgstore.New(nil, pgstore.Config{})
	if !errors.Is(err, pgstore.ErrInvalidConfig) || !strings.Contains(err.Error(), "pgxpool") {
		t.Errorf("New(nil pool): %v, want ErrInvalidConfig naming pgxpool", err)
	}
	_, err = pgstore.Open(t.Context(), "postgres://127.0.0.1:1/x", pgstore.Config{Schema: "bad-name"})
	if !errors.Is(err, pgstore.ErrInvalidConfig) {
		t.Errorf("Open with a bad schema: %v, want ErrInvalidConfig before connecting", err)
	}
}

// TestOpenBadDSN: a malformed DSN, a closed port and a database that does
// not exist are clear errors naming what failed.
func TestOpenBadDSN(t *testing.T) {
	t.Parallel()
	good := testDSN(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	cases := []struct{ dsn, want string }{
		{"postgres://user:secret@127.0.0.1:notaport/db", "cannot parse"},
		{"postgres://postgres:secret@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=5", "cannot reach 127.0.0.1:1"},
		{otherDatabase(good, "no_such_database"), `database "no_such_database"`},
	}
	for _, c := range cases {
		s, err := pgstore.Open(ctx, c.dsn, pgstore.Config{})
		if err == nil {
			s.Close()
			t.Errorf("Open(%q): no error", c.dsn)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "pgstore: Open: ") || !strings.Contains(msg, c.want) {
			t.Errorf("Open(%q): %q, want a pgstore: Open error containing %q", c.dsn, msg, c.want)
		}
		if strings.Contains(msg, "secret") {
			t.Errorf("Open(%q): the error shows the password: %q", c.dsn, msg)
		}
	}
	s, err := pgstore.Open(ctx, good, pgstore.Config{Schema: "forage_open_ok"})
	if err != nil {
		t.Fatalf("Open(good DSN): %v", err)
	}
	s.Close()
}

// otherDatabase returns dsn naming database db instead.
func otherDatabase(dsn, db string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Path = "/" + db
		return u.String()
	}
	return dsn + " dbname=" + db // key=value form: the last value wins
}

// TestNotMigrated: every kind of call on a schema that Migrate never
// created fails with ErrNotMigrated, naming the schema and the remedy.
func TestNotMigrated(t *testing.T) {
	t.Parallel()
	schema := freshSchema(t)
	s, err := pgstore.New(testPool(t), pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	key := checkpoint.Key{Stream: "s", Mode: checkpoint.CatchUp}
	calls := map[string]func() error{
		"Load":     func() error { _, err := s.Load(ctx, key); return err },
		"Commit":   func() error { _, err := s.Commit(ctx, key, nil, 0, checkpoint.Lease{}); return err },
		"Acquire":  func() error { _, err := s.Acquire(ctx, "s", "o", time.Minute); return err },
		"AddGap":   func() error { _, err := s.AddGap(ctx, checkpoint.Gap{Key: key, Reason: "r"}); return err },
		"ListGaps": func() error { _, err := s.ListGaps(ctx, checkpoint.GapQuery{}); return err },
		"Coverage": func() error { _, err := s.Coverage(ctx, "c"); return err },
		"UpdateShares": func() error {
			return s.UpdateShares(ctx, "p", func(doc []byte) ([]byte, error) { return doc, nil })
		},
	}
	for name, call := range calls {
		err := call()
		if !errors.Is(err, pgstore.ErrNotMigrated) {
			t.Errorf("%s: %v, want ErrNotMigrated", name, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, `"`+schema+`"`) || !strings.Contains(msg, "Migrate") {
			t.Errorf("%s: %q does not name the schema and Migrate", name, msg)
		}
	}
	// Migrate fixes it.
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctx, key); err != nil {
		t.Fatalf("Load after Migrate: %v", err)
	}
}

// TestTimesRoundTripExactly: ranges keep every nanosecond and any year,
// and the store's clock is kept to the microsecond, what Commit returns
// being what Load reads.
func TestTimesRoundTripExactly(t *testing.T) {
	t.Parallel()
	now := time.Date(2031, 5, 6, 7, 8, 9, 123456789, time.FixedZone("X", 3600))
	s := newStore(t, func() time.Time { return now })
	ctx := t.Context()
	ranges := []checkpoint.Range{
		{Start: time.Unix(0, 1), End: time.Unix(0, 2)},
		{Start: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), End: time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC)},
		{Start: time.Date(1969, 12, 31, 23, 59, 59, 999999999, time.UTC), End: time.Unix(0, 0)},
		{Start: time.Date(3000, 1, 1, 0, 0, 0, 7, time.UTC), End: time.Date(9999, 1, 1, 0, 0, 0, 999999999, time.UTC)},
	}
	for i, r := range ranges {
		series := string(rune('a' + i))
		if err := s.AddCoverage(ctx, series, r); err != nil {
			t.Fatalf("range %d: AddCoverage(%v): %v", i, r, err)
		}
		c, err := s.Coverage(ctx, series)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Ranges(); len(got) != 1 || !got[0].Start.Equal(r.Start) || !got[0].End.Equal(r.End) {
			t.Errorf("range %d: stored %v, read back %v", i, r, got)
		}
		g, err := s.AddGap(ctx, checkpoint.Gap{Key: checkpoint.Key{Stream: series, Mode: checkpoint.CatchUp}, Range: r, Reason: "x"})
		if err != nil {
			t.Fatal(err)
		}
		gs, err := s.ListGaps(ctx, checkpoint.GapQuery{Stream: series})
		if err != nil || len(gs) != 1 || !gs[0].Range.Start.Equal(r.Start) || !gs[0].Range.End.Equal(r.End) || !gs[0].Created.Equal(g.Created) {
			t.Errorf("range %d: gap %+v, listed %+v (%v)", i, g, gs, err)
		}
	}
	key := checkpoint.Key{Stream: "s", Mode: checkpoint.SteadyState}
	cp, err := s.Commit(ctx, key, []byte("c"), 0, checkpoint.Lease{})
	if err != nil {
		t.Fatal(err)
	}
	if want := now.Truncate(time.Microsecond); !cp.UpdatedAt.Equal(want) {
		t.Errorf("UpdatedAt %v, want %v (the clock to the microsecond)", cp.UpdatedAt, want)
	}
	loaded, err := s.Load(ctx, key)
	if err != nil || !loaded.UpdatedAt.Equal(cp.UpdatedAt) {
		t.Errorf("Load: UpdatedAt %v (%v), want %v as Commit returned", loaded.UpdatedAt, err, cp.UpdatedAt)
	}
}
