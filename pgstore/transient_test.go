package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/pgstore"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestTransientTellsAnOutageFromAVerdict: the errors of a database that is
// away for a moment are transient, wrapped as a run wraps them; a
// provider's verdict, a lost compare-and-swap and a broken statement are
// not (each host wrote this list again: examples/ohlcv had it).
func TestTransientTellsAnOutageFromAVerdict(t *testing.T) {
	t.Parallel()
	wrap := func(err error) error { return fmt.Errorf("slice: BTCUSDT/catch_up: commit: %w", err) }
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"starting up", &pgconn.PgError{Code: "57P03"}, true},
		{"serialization failure", &pgconn.PgError{Code: "40001"}, true},
		{"deadlock", &pgconn.PgError{Code: "40P01"}, true},
		{"too many connections", &pgconn.PgError{Code: "53300"}, true},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, true},
		{"reset", syscall.ECONNRESET, true},
		{"closed under a statement", io.ErrUnexpectedEOF, true},
		{"pgx's conn closed", errors.New("conn closed"), true},
		{"the pacer on the database", &budget.Error{Reason: forage.ReasonPacer, Err: &pgconn.PgError{Code: "57P01"}}, true},
		{"nil", nil, false},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"syntax error", &pgconn.PgError{Code: "42601"}, false},
		{"lost compare-and-swap", checkpoint.ErrConflict, false},
		{"invalid", checkpoint.ErrInvalid, false},
		{"provider's verdict", &budget.Error{Reason: forage.ReasonPermanent, Status: 401}, false},
		{"provider down", &budget.Error{Reason: forage.ReasonUnavailable, Err: syscall.ECONNREFUSED}, false},
		{"the pacer, not the database", &budget.Error{Reason: forage.ReasonPacer, Err: errors.New("share store: bad document")}, false},
		{"canceled", context.Canceled, false},
	} {
		for _, err := range []error{tc.err, wrap(tc.err)} {
			if tc.err == nil && err != nil {
				continue // a wrapped nil is an error of its own
			}
			if got := pgstore.Transient(err); got != tc.want {
				t.Errorf("%s: Transient(%v) = %v, want %v", tc.name, err, got, tc.want)
			}
		}
	}
}
