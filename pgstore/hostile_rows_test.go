package pgstore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/forage-go/forage/schedule"
	"github.com/jackc/pgx/v5"
)

// Job times edited by hand to '-infinity' or 'infinity' (a common way to
// park a row in SQL) read as the year 1 and the year 9999: due at once, and
// never due. Scanned as they were, one such row failed every claim (every
// provider's) and every listing of jobs (Backfilled, Snapshot, AddStream).
func TestJobTimesEditedToInfinityAreRead(t *testing.T) {
	for _, edit := range []string{"-infinity", "infinity"} {
		t.Run(edit, func(t *testing.T) {
			s := newStore(t, nil)
			js := s.Jobs()
			ctx := t.Context()
			now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
			var ids []int64
			for _, p := range []string{"p", "q"} {
				j, err := js.Upsert(ctx, schedule.Job{Provider: p, Kind: schedule.KindIncremental, Stream: "s", Priority: 20,
					Interval: time.Minute, State: schedule.StateIdle, NextRun: now, Created: now, Updated: now})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, j.ID)
			}
			table := pgx.Identifier{s.Schema(), "jobs"}.Sanitize()
			if _, err := s.Pool().Exec(ctx, `UPDATE `+table+` SET next_run = '`+edit+`' WHERE id = $1`, ids[0]); err != nil {
				t.Fatal(err)
			}
			got, err := js.Claim(ctx, now, "o", time.Minute, 4, schedule.ClaimFilter{})
			if err != nil {
				t.Fatalf("Claim with one job at next_run %s: %v", edit, err)
			}
			want := 2 // -infinity: due at once
			if edit == "infinity" {
				want = 1 // parked: the other provider's job alone
			}
			if len(got) != want {
				t.Fatalf("Claim with one job at next_run %s: %d jobs, want %d", edit, len(got), want)
			}
			all, err := js.List(ctx, schedule.Query{})
			if err != nil || len(all) != 2 {
				t.Fatalf("List with one job at next_run %s: %d jobs, %v; want both", edit, len(all), err)
			}
		})
	}
}

// A provider_shares row edited by hand to version 0, which no save writes:
// it read as no row, its insert did nothing, and every save failed as "16
// saves lost to other processes in a row", for good. The error says what
// the row is and how to mend it.
func TestASharesRowAtVersionZeroIsNamed(t *testing.T) {
	s := newStore(t, nil)
	ctx := t.Context()
	if err := s.UpdateShares(ctx, "k", func([]byte) ([]byte, error) { return []byte("{}"), nil }); err != nil {
		t.Fatal(err)
	}
	table := pgx.Identifier{s.Schema(), "provider_shares"}.Sanitize()
	if _, err := s.Pool().Exec(ctx, `UPDATE `+table+` SET version = 0`); err != nil {
		t.Fatal(err)
	}
	err := s.UpdateShares(ctx, "k", func([]byte) ([]byte, error) { return []byte("{}"), nil })
	if err == nil || !strings.Contains(err.Error(), "version 0") || strings.Contains(err.Error(), "lost to other processes") {
		t.Fatalf("UpdateShares on a row at version 0: %v; want an error naming the row's version", err)
	}
}
