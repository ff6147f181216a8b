package pgstore

import (
	"fmt"
	"time"

	"github.com/forage-go/forage/checkpoint"
)

// The argument checks of the checkpoint contract, with the messages of the
// checkpoint package's own stores. Each returns an error wrapping
// checkpoint.ErrInvalid that names the argument and the value.

func checkKey(k checkpoint.Key) error {
	if k.Stream == "" {
		return fmt.Errorf("%w: Key.Stream must not be empty", checkpoint.ErrInvalid)
	}
	if !k.Mode.Valid() {
		return fmt.Errorf("%w: Key.Mode must be catch_up or steady_state (got %v)", checkpoint.ErrInvalid, k.Mode)
	}
	return nil
}

func checkTTL(ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("%w: lease ttl must be > 0 (got %v)", checkpoint.ErrInvalid, ttl)
	}
	return nil
}

func checkLease(l checkpoint.Lease) error {
	if l.Stream == "" {
		return fmt.Errorf("%w: Lease.Stream must not be empty", checkpoint.ErrInvalid)
	}
	if l.Token <= 0 {
		return fmt.Errorf("%w: Lease.Token must be > 0 (got %d)", checkpoint.ErrInvalid, l.Token)
	}
	return nil
}

func checkCommit(key checkpoint.Key, expect int64, l checkpoint.Lease) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if expect < 0 {
		return fmt.Errorf("%w: expected version must be >= 0 (got %d)", checkpoint.ErrInvalid, expect)
	}
	if l.Token < 0 {
		return fmt.Errorf("%w: Lease.Token must be >= 0 (got %d)", checkpoint.ErrInvalid, l.Token)
	}
	if l.Token > 0 && l.Stream != key.Stream {
		return fmt.Errorf("%w: lease is for stream %q, not %q", checkpoint.ErrInvalid, l.Stream, key.Stream)
	}
	return nil
}

func checkGap(g checkpoint.Gap) error {
	if err := checkKey(g.Key); err != nil {
		return err
	}
	if g.Reason == "" {
		return fmt.Errorf("%w: Gap.Reason must not be empty", checkpoint.ErrInvalid)
	}
	if !g.Range.IsZero() && g.Range.Empty() {
		return fmt.Errorf("%w: Gap.Range must be zero or non-empty (got %v)", checkpoint.ErrInvalid, g.Range)
	}
	return nil
}

func checkQuery(q checkpoint.GapQuery) error {
	if q.Mode != 0 && !q.Mode.Valid() {
		return fmt.Errorf("%w: GapQuery.Mode must be 0, catch_up or steady_state (got %v)", checkpoint.ErrInvalid, q.Mode)
	}
	if q.After < 0 {
		return fmt.Errorf("%w: GapQuery.After must be >= 0 (got %d)", checkpoint.ErrInvalid, q.After)
	}
	if q.Limit < 0 {
		return fmt.Errorf("%w: GapQuery.Limit must be >= 0 (got %d)", checkpoint.ErrInvalid, q.Limit)
	}
	return nil
}

func checkSeries(series string, r checkpoint.Range) error {
	if series == "" {
		return fmt.Errorf("%w: series must not be empty", checkpoint.ErrInvalid)
	}
	if r.Empty() {
		return fmt.Errorf("%w: coverage range must be non-empty (got %v)", checkpoint.ErrInvalid, r)
	}
	return nil
}
