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
	if err := checkpoint.CheckName("Key.Stream", k.Stream); err != nil {
		return err
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

// checkAcquire checks Acquire's arguments, the stream first.
func checkAcquire(stream, owner string, ttl time.Duration) error {
	if err := checkpoint.CheckName("lease stream", stream); err != nil {
		return err
	}
	if err := checkpoint.CheckName("lease owner", owner); err != nil {
		return err
	}
	return checkTTL(ttl)
}

func checkLease(l checkpoint.Lease) error {
	if err := checkpoint.CheckName("Lease.Stream", l.Stream); err != nil {
		return err
	}
	if l.Token <= 0 {
		return fmt.Errorf("%w: Lease.Token must be > 0 (got %d)", checkpoint.ErrInvalid, l.Token)
	}
	return checkOwner(l)
}

// checkOwner checks the owner of a lease with a token. An owner that no
// store could have granted is an argument error, not a lost lease.
func checkOwner(l checkpoint.Lease) error {
	if l.Token > 0 {
		return checkpoint.CheckName("Lease.Owner", l.Owner)
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
	return checkOwner(l)
}

func checkGap(g checkpoint.Gap) error {
	if err := checkKey(g.Key); err != nil {
		return err
	}
	if err := checkpoint.CheckName("Gap.Reason", g.Reason); err != nil {
		return err
	}
	if !g.Range.IsZero() && g.Range.Empty() {
		return fmt.Errorf("%w: Gap.Range must be zero or non-empty (got %v)", checkpoint.ErrInvalid, g.Range)
	}
	return nil
}

func checkQuery(q checkpoint.GapQuery) error {
	if q.Stream != "" {
		if err := checkpoint.CheckName("GapQuery.Stream", q.Stream); err != nil {
			return err
		}
	}
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
	if err := checkpoint.CheckName("series", series); err != nil {
		return err
	}
	if r.Empty() {
		return fmt.Errorf("%w: coverage range must be non-empty (got %v)", checkpoint.ErrInvalid, r)
	}
	return nil
}
