package checkpoint

import "errors"

// The sentinel errors of this package. Stores wrap them with detail, so test
// with [errors.Is]. Every message starts with "checkpoint: ".
var (
	// ErrConflict means a compare-and-swap lost: the checkpoint's version is
	// no longer the one the caller expected. Load again and decide; the
	// caller still holds its lease.
	ErrConflict = errors.New("checkpoint: version conflict")

	// ErrLeaseHeld means another owner holds a live lease on the stream
	// (Acquire), or an unfenced commit met a stream that is leased (Commit).
	// Yield: the stream is being run elsewhere.
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

	// ErrInvalid means an argument broke the contract: an empty stream or
	// owner, an invalid mode, a non-positive TTL, an empty range. The
	// message names the argument and the value.
	ErrInvalid = errors.New("checkpoint: invalid argument")

	// ErrCorrupt means a file store file failed its integrity check (torn
	// write, flipped bit, truncation, foreign content). The message names
	// the file. Corrupt state is never read as empty progress.
	ErrCorrupt = errors.New("checkpoint: corrupt file")

	// ErrClosed means the store was closed.
	ErrClosed = errors.New("checkpoint: store closed")

	// ErrLocked means another FileStore (in this or another process) has
	// the directory open.
	ErrLocked = errors.New("checkpoint: directory locked")
)
