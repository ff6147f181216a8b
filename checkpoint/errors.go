package checkpoint

import (
	"errors"
	"fmt"
	"time"
)

// The sentinel errors of this package. Stores wrap them with detail, so test
// with [errors.Is]. Every message starts with "checkpoint: ".
var (
	// ErrConflict means a compare-and-swap lost: the checkpoint's version is
	// no longer the one the caller expected. Load again and decide; the
	// caller still holds its lease.
	ErrConflict = errors.New("checkpoint: version conflict")

	// ErrLeaseHeld means another owner holds a live lease on the stream
	// (Acquire, whose error is a [*LeaseHeldError] naming the holder and
	// its expiry), or an unfenced commit met a stream that is leased
	// (Commit). Yield: the stream is being run elsewhere.
	ErrLeaseHeld = errors.New("checkpoint: lease held")

	// ErrLeaseLost means the presented lease is no longer the stream's
	// current grant: it was released, or it expired and another owner took
	// it over, or it was never granted. Stop the run without retrying; the
	// new holder owns the cursor. It is distinct from [ErrConflict] because
	// the remedy differs: a conflict is retried after a Load, a lost lease
	// never is.
	ErrLeaseLost = errors.New("checkpoint: lease lost")

	// ErrNotFound means the named record never existed (a gap ID that was
	// never issued). A missing checkpoint or coverage is not an error.
	ErrNotFound = errors.New("checkpoint: not found")

	// ErrInvalid means an argument broke the contract: a stream, series,
	// owner or reason that is not a valid name ([CheckName]: empty, invalid
	// UTF-8, a control character, longer than [MaxNameLen]), an invalid
	// mode, a non-positive TTL, an empty range. The message names the
	// argument and the value.
	ErrInvalid = errors.New("checkpoint: invalid argument")

	// ErrCorrupt means a file store file failed its integrity check (torn
	// write, flipped bit, truncation, foreign content). The message names
	// the file. Corrupt state is never read as empty progress.
	ErrCorrupt = errors.New("checkpoint: corrupt file")

	// ErrClosed means the store was closed.
	ErrClosed = errors.New("checkpoint: store closed")

	// ErrLocked means another file store (in this or another process) has
	// the directory open.
	ErrLocked = errors.New("checkpoint: directory locked")
)

// LeaseHeldError is the error [Leases.Acquire] returns when another owner
// holds a live lease on the stream: it carries who holds it and until when,
// so a caller that yields can say so. It wraps [ErrLeaseHeld]; read it with
// [errors.As]:
//
//	var held *checkpoint.LeaseHeldError
//	if errors.As(err, &held) {
//		log.Printf("%s is run by %s until %v", held.Lease.Stream, held.Lease.Owner, held.Lease.Expires)
//	}
type LeaseHeldError struct {
	// Lease is the holder's grant as the store saw it when it refused:
	// Stream, Owner, Token and Expires. Expires is when it stops excluding
	// others unless its holder renews it; a store may end it earlier when
	// it knows the holder died (see [OpenFileStore] and the pgstore module).
	Lease Lease
}

// Error says which stream is held, by whom, until when, and the token.
func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("%v: stream %q is leased by %q until %s (token %d)", ErrLeaseHeld,
		e.Lease.Stream, e.Lease.Owner, e.Lease.Expires.Format(time.RFC3339Nano), e.Lease.Token)
}

// Unwrap returns [ErrLeaseHeld], so errors.Is(err, ErrLeaseHeld) holds.
func (e *LeaseHeldError) Unwrap() error { return ErrLeaseHeld }
