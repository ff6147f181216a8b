package pgstore

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/forage-go/forage/schedule"
)

// The argument checks of the schedule.JobStore contract. Each error wraps
// schedule.ErrInvalid and names the argument and the value. The
// contract's own checks ([schedule.Job.Validate]) come first; the rest are
// what PostgreSQL cannot store: text that is not UTF-8 or holds NUL, times
// outside timestamptz's range.

// Representable times: timestamptz runs from 4713 BC to 294276 AD; pgx
// encodes microseconds since 2000 in an int64, which reaches further.
const (
	minYear = -4712 // 4713 BC
	maxYear = 294275
)

// checkJob validates job as Upsert and Update must, then brings it to what
// the database stores: times truncated to the microsecond, LastError as
// valid UTF-8 without NUL.
func checkJob(j *schedule.Job) error {
	if err := j.Validate(); err != nil {
		return err
	}
	for _, f := range [...]struct{ name, val string }{
		{"Job.Provider", j.Provider}, {"Job.Stream", j.Stream}, {"Job.Lease.Owner", j.Lease.Owner},
	} {
		if err := checkText(f.name, f.val); err != nil {
			return err
		}
	}
	for _, f := range [...]struct {
		name string
		t    *time.Time
	}{
		{"Job.NextRun", &j.NextRun}, {"Job.Stats.LastRun", &j.Stats.LastRun},
		{"Job.Stats.LastSuccess", &j.Stats.LastSuccess}, {"Job.Lease.Until", &j.Lease.Until},
		{"Job.Created", &j.Created}, {"Job.Updated", &j.Updated},
	} {
		if err := checkTime(f.name, *f.t); err != nil {
			return err
		}
		*f.t = f.t.Truncate(time.Microsecond)
	}
	j.Stats.LastError = cleanText(j.Stats.LastError)
	return nil
}

// checkID checks a job ID argument.
func checkID(name string, id int64) error {
	if id <= 0 {
		return fmt.Errorf("%w: %s must be > 0 (got %d)", schedule.ErrInvalid, name, id)
	}
	return nil
}

// checkClaim checks Claim's arguments as the contract asks, then that now
// and the lease's end can be stored.
func checkClaim(now time.Time, owner string, ttl time.Duration, limit int, f *schedule.ClaimFilter) error {
	switch {
	case owner == "":
		return fmt.Errorf("%w: owner must not be empty", schedule.ErrInvalid)
	case ttl <= 0:
		return fmt.Errorf("%w: ttl must be > 0 (got %v)", schedule.ErrInvalid, ttl)
	case limit < 1:
		return fmt.Errorf("%w: limit must be >= 1 (got %d)", schedule.ErrInvalid, limit)
	case f.PerProvider < 0:
		return fmt.Errorf("%w: ClaimFilter.PerProvider must be >= 0 (got %d)", schedule.ErrInvalid, f.PerProvider)
	case f.Aging < 0 || f.Aging > schedule.MaxAging:
		return fmt.Errorf("%w: ClaimFilter.Aging must be in [0, %v] (got %v)", schedule.ErrInvalid, schedule.MaxAging, f.Aging)
	}
	if err := checkText("owner", owner); err != nil {
		return err
	}
	if err := checkTime("now", now); err != nil {
		return err
	}
	return checkTime("now + ttl", now.Add(ttl))
}

// checkText reports text PostgreSQL cannot store.
func checkText(name, s string) error {
	if !storable(s) {
		return fmt.Errorf("%w: %s must be valid UTF-8 without NUL bytes: PostgreSQL stores it as text (got %q)",
			schedule.ErrInvalid, name, s)
	}
	return nil
}

// storable reports whether PostgreSQL can store s as text.
func storable(s string) bool { return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 }

// cleanText makes s storable: invalid bytes become U+FFFD, NULs go.
func cleanText(s string) string {
	if storable(s) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
}

// checkTime reports a time outside timestamptz's range.
func checkTime(name string, t time.Time) error {
	if y := t.UTC().Year(); y < minYear || y > maxYear {
		return fmt.Errorf("%w: %s must be within PostgreSQL's timestamptz range, 4713 BC to 294275 AD (got %v)",
			schedule.ErrInvalid, name, t)
	}
	return nil
}
