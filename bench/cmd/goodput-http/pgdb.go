package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgAdmin is the harness's connection to the PostgreSQL server the pg
// clients share: it makes each cell's database, reads what the cell's
// processes asked of the server, and drops the database. It connects to
// the database of -pg, never to a cell's, so its own statements are not
// counted.
type pgAdmin struct {
	dsn string
	// statements is true when pg_stat_statements can be read (the server
	// preloads it; scripts/pg-test.sh does with FORAGE_PG_OPTS).
	statements bool
}

// newPGAdmin checks the server at dsn is reachable and whether it counts
// statements.
func newPGAdmin(ctx context.Context, dsn string) (*pgAdmin, error) {
	a := &pgAdmin{dsn: dsn}
	err := a.with(ctx, func(c *pgx.Conn) error {
		if _, err := c.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
			return nil // not installed: xacts only
		}
		_, err := c.Exec(ctx, `SELECT 1 FROM pg_stat_statements LIMIT 1`)
		a.statements = err == nil // fails unless preloaded
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("-pg: %w", err)
	}
	return a, nil
}

// with runs f on a fresh connection to the admin database.
func (a *pgAdmin) with(ctx context.Context, f func(*pgx.Conn) error) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, a.dsn)
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	return f(c)
}

// create makes database name and returns a DSN for it.
func (a *pgAdmin) create(ctx context.Context, name string) (string, error) {
	err := a.with(ctx, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
		return err
	})
	if err != nil {
		return "", err
	}
	return withDatabase(a.dsn, name)
}

// drop removes database name, ending any session still in it.
func (a *pgAdmin) drop(ctx context.Context, name string) error {
	return a.with(ctx, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
		return err
	})
}

// withDatabase returns dsn with its database replaced by name: a URL's
// path, or a key=value string's dbname (a later key wins).
func withDatabase(dsn, name string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", errors.New("-pg: not a valid URL")
		}
		u.Path = "/" + name
		return u.String(), nil
	}
	return dsn + " dbname=" + name, nil
}

// dbCount is what the server counted for a cell's database at one moment.
type dbCount struct {
	// Xacts is pg_stat_database's xact_commit + xact_rollback: every
	// statement sent outside a transaction, and every transaction.
	Xacts int64 `json:"xacts"`
	// Statements is pg_stat_statements' calls (each statement the
	// processes sent, BEGIN and COMMIT included); Shares those on the
	// provider_shares table (the lease renewals: a read and a
	// compare-and-swap write each); Pages the candle inserts, one per page
	// stored, each in a transaction of 4 statements (BEGIN, the fenced
	// checkpoint write, the insert, COMMIT). All 0 when the server does
	// not count statements.
	Statements int64 `json:"statements"`
	Shares     int64 `json:"shares"`
	Pages      int64 `json:"pages"`
}

// pageStatements is the statements of one page's commit.
const pageStatements = 4

// sub returns c - b.
func (c dbCount) sub(b dbCount) dbCount {
	return dbCount{c.Xacts - b.Xacts, c.Statements - b.Statements, c.Shares - b.Shares, c.Pages - b.Pages}
}

// count reads the counters of database name. pg_stat_database lags a
// running backend by up to a second or so (a backend reports its
// transactions at most once a second); pg_stat_statements does not.
func (a *pgAdmin) count(ctx context.Context, name string) (dbCount, error) {
	var n dbCount
	err := a.with(ctx, func(c *pgx.Conn) error {
		err := c.QueryRow(ctx, `SELECT coalesce(xact_commit + xact_rollback, 0) FROM pg_stat_database WHERE datname = $1`, name).Scan(&n.Xacts)
		if err != nil || !a.statements {
			return err
		}
		return c.QueryRow(ctx, `SELECT coalesce(sum(calls), 0)::bigint,
			coalesce(sum(calls) FILTER (WHERE query LIKE '%provider_shares%'), 0)::bigint,
			coalesce(sum(calls) FILTER (WHERE query LIKE 'INSERT INTO %.candles %'), 0)::bigint
			FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = $1)`, name).Scan(&n.Statements, &n.Shares, &n.Pages)
	})
	return n, err
}

// settle waits until no session is left in database name (up to 10 s), so
// that every backend has reported its counts: a backend reports them when
// it exits.
func (a *pgAdmin) settle(ctx context.Context, name string) error {
	return a.with(ctx, func(c *pgx.Conn) error {
		for range 100 {
			var n int
			if err := c.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = $1`, name).Scan(&n); err != nil {
				return err
			}
			if n == 0 {
				return nil
			}
			select {
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return fmt.Errorf("sessions still open in database %s after 10s", name)
	})
}

// leases reads the leases of every provider key shared in database name
// (pgstore's provider_shares in schema forage): the fraction of the
// provider's rate each holder holds, and the shared rate.
func (a *pgAdmin) leases(ctx context.Context, dsn string) (leaseView, error) {
	var v leaseView
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return v, err
	}
	defer c.Close(context.WithoutCancel(ctx))
	var doc []byte
	if err := c.QueryRow(ctx, `SELECT doc FROM forage.provider_shares LIMIT 1`).Scan(&doc); err != nil {
		return v, err
	}
	var d struct {
		Rate   float64 `json:"rate"`
		Leases map[string]struct {
			Share   float64   `json:"share"`
			Expires time.Time `json:"expires"`
		} `json:"leases"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return v, err
	}
	v.Rate = d.Rate
	for _, l := range d.Leases {
		v.Shares = append(v.Shares, l.Share)
	}
	slices.Sort(v.Shares)
	return v, nil
}

// leaseView is the shared record at one moment: the rate the processes
// share, and each live lease's fraction of it.
type leaseView struct {
	Rate   float64   `json:"rate"`
	Shares []float64 `json:"shares"`
}

// String renders v as "rate 48.2/s, 3 leases 0.33+0.33+0.34".
func (v leaseView) String() string {
	parts := make([]string, len(v.Shares))
	for i, s := range v.Shares {
		parts[i] = fmt.Sprintf("%.2f", s)
	}
	return fmt.Sprintf("rate %.1f/s, %d leases %s", v.Rate, len(v.Shares), strings.Join(parts, "+"))
}
