package pgstore

import (
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/jackc/pgx/v5/pgconn"
)

// Transient reports whether err, returned by a call of the Store or by a
// run that used it (a [slice.Runner] run, a scheduler's stream), is
// PostgreSQL unreachable for a moment: a connection refused, reset or
// closed under a statement, a server shutting down, restarting or out of
// connections, a serialization failure or a deadlock. Doing the work again
// once the database is back is then safe: data and checkpoint commit
// together or not at all ([NewTxSink]), and the next run starts from the
// committed checkpoint. A provider's verdict (a [budget.Error], unless its
// pacer failed on the database), a lost compare-and-swap
// ([checkpoint.ErrConflict]), an invalid argument and any other SQL error
// are not.
//
// A host decides with it whether a failed run ends its command or is
// waited out: the scheduler runs the stream again either way.
func Transient(err error) bool {
	if err == nil || errors.Is(err, checkpoint.ErrInvalid) || errors.Is(err, checkpoint.ErrConflict) {
		return false
	}
	var be *budget.Error
	if errors.As(err, &be) {
		// A provider's verdict, unless the pacer itself failed
		// (ReasonPacer) on the database.
		return be.Reason == forage.ReasonPacer && be.Err != nil && Transient(be.Err)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "57P01", "57P02", "57P03", // admin shutdown, crash shutdown, cannot connect now
			"40001", "40P01", // serialization failure, deadlock detected
			"53300": // too many connections
			return true
		}
		return strings.HasPrefix(pe.Code, "08") // connection exceptions
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || pgconn.SafeToRetry(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		strings.Contains(err.Error(), "conn closed") // pgx's own, unwrapped: a connection closed under a statement
}
