package schedule

import (
	"errors"

	"github.com/forage-go/forage/internal/cfgerr"
)

// The sentinel errors of this package. Stores and the scheduler wrap them
// with detail, so test with [errors.Is]. Every message starts with
// "schedule: ".
var (
	// ErrInvalidConfig is wrapped by every error [New] returns for a bad
	// [Config]; the message names the field, the rule and the value.
	ErrInvalidConfig = errors.New("schedule: invalid config")

	// invalidConfig builds this package's configuration errors.
	invalidConfig = cfgerr.For("schedule", ErrInvalidConfig)

	// ErrInvalid means an argument broke a contract: an empty provider or
	// stream, an unknown kind or state, a priority out of range, a
	// non-positive ID, TTL or limit. The message names the field and the
	// value.
	ErrInvalid = errors.New("schedule: invalid argument")

	// ErrNotFound means no job has the given ID: it was never created or it
	// was deleted.
	ErrNotFound = errors.New("schedule: job not found")

	// ErrConflict means a compare-and-swap lost: the job's version is no
	// longer the one the caller read. Get the job again and re-apply the
	// change.
	ErrConflict = errors.New("schedule: version conflict")

	// ErrRunning means the operation needs a job that is not running, e.g.
	// [Scheduler.RunNow] on a job whose run is in progress.
	ErrRunning = errors.New("schedule: job is running")

	// ErrInterrupted is the cause ([context.Cause]) of a run's context when
	// the scheduler stops the run itself: the job or its provider was paused,
	// the job was deleted, its lease was lost, or Run is returning. A
	// runner seeing it stops at its next slice boundary; the run is not
	// counted as a failure.
	ErrInterrupted = errors.New("schedule: run interrupted")
)
