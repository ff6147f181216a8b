package checkpoint

import (
	"context"
	"fmt"
	"time"
)

// The argument checks shared by the stores. Each returns an error wrapping
// ErrInvalid that names the argument and the value.

func checkCtx(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

func checkKey(k Key) error {
	if err := CheckName("Key.Stream", k.Stream); err != nil {
		return err
	}
	if !k.Mode.Valid() {
		return fmt.Errorf("%w: Key.Mode must be catch_up or steady_state (got %v)", ErrInvalid, k.Mode)
	}
	return nil
}

func checkTTL(ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("%w: lease ttl must be > 0 (got %v)", ErrInvalid, ttl)
	}
	return nil
}

// checkAcquire checks Acquire's arguments, the stream first.
func checkAcquire(stream, owner string, ttl time.Duration) error {
	if err := CheckName("lease stream", stream); err != nil {
		return err
	}
	if err := CheckName("lease owner", owner); err != nil {
		return err
	}
	return checkTTL(ttl)
}

func checkLease(l Lease) error {
	if err := CheckName("Lease.Stream", l.Stream); err != nil {
		return err
	}
	if l.Token <= 0 {
		return fmt.Errorf("%w: Lease.Token must be > 0 (got %d)", ErrInvalid, l.Token)
	}
	return checkOwner(l)
}

// checkOwner checks the owner of a lease with a token. An owner that no
// store could have granted is an argument error, not a lost lease.
func checkOwner(l Lease) error {
	if l.Token > 0 {
		return CheckName("Lease.Owner", l.Owner)
	}
	return nil
}

func checkCommit(key Key, expect int64, l Lease) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if expect < 0 {
		return fmt.Errorf("%w: expected version must be >= 0 (got %d)", ErrInvalid, expect)
	}
	if l.Token < 0 {
		return fmt.Errorf("%w: Lease.Token must be >= 0 (got %d)", ErrInvalid, l.Token)
	}
	if l.Token > 0 && l.Stream != key.Stream {
		return fmt.Errorf("%w: lease is for stream %s, not %s", ErrInvalid, quoteShort(l.Stream), quoteShort(key.Stream))
	}
	return checkOwner(l)
}

func checkGap(g Gap) error {
	if err := checkKey(g.Key); err != nil {
		return err
	}
	if err := CheckName("Gap.Reason", g.Reason); err != nil {
		return err
	}
	return checkGapRange(g.Range)
}

// checkStoredGap is checkGap for a gap loaded from a file: a file written
// before names were checked keeps its gaps loadable, and only a record no
// version could have written is refused.
func checkStoredGap(g Gap) error {
	if g.Key.Stream == "" || !g.Key.Mode.Valid() || g.Reason == "" {
		return fmt.Errorf("%w: gap without a stream, a valid mode or a reason", ErrInvalid)
	}
	return checkGapRange(g.Range)
}

func checkGapRange(r Range) error {
	if !r.IsZero() && r.Empty() {
		return fmt.Errorf("%w: Gap.Range must be zero or non-empty (got %v)", ErrInvalid, r)
	}
	return nil
}

func checkQuery(q GapQuery) error {
	if q.Stream != "" {
		if err := CheckName("GapQuery.Stream", q.Stream); err != nil {
			return err
		}
	}
	if q.Mode != 0 && !q.Mode.Valid() {
		return fmt.Errorf("%w: GapQuery.Mode must be 0, catch_up or steady_state (got %v)", ErrInvalid, q.Mode)
	}
	if q.After < 0 {
		return fmt.Errorf("%w: GapQuery.After must be >= 0 (got %d)", ErrInvalid, q.After)
	}
	if q.Limit < 0 {
		return fmt.Errorf("%w: GapQuery.Limit must be >= 0 (got %d)", ErrInvalid, q.Limit)
	}
	return nil
}

func checkSeries(series string, r Range) error {
	if err := CheckName("series", series); err != nil {
		return err
	}
	if r.Empty() {
		return fmt.Errorf("%w: coverage range must be non-empty (got %v)", ErrInvalid, r)
	}
	return nil
}
