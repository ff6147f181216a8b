package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/internal/cfgerr"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// defaultSchema is the schema of a [Config] whose Schema is empty.
const defaultSchema = "forage"

// The package's sentinel errors. Test with [errors.Is]; the checkpoint
// methods also return the [checkpoint] sentinels their contract names.
var (
	// ErrInvalidConfig is wrapped by every error [New] and [Open] return
	// for a configuration value out of range; the message names the
	// field, the rule and the value.
	ErrInvalidConfig = errors.New("pgstore: invalid config")

	// invalid builds this package's configuration errors.
	invalid = cfgerr.For("pgstore", ErrInvalidConfig)

	// ErrNotMigrated means the schema, or a table or function in it, does
	// not exist: [Store.Migrate] was not run against this database (or ran
	// for another schema). The message names the schema.
	ErrNotMigrated = errors.New("pgstore: schema not migrated")
)

// Config configures a [Store]. The zero Config is valid and means all
// defaults.
type Config struct {
	// Schema is the PostgreSQL schema holding the store's tables, so that
	// several stores (or tests) share a database without sharing state. It
	// must be 1 to 63 ASCII letters, digits or underscores, not starting
	// with a digit; it is used quoted, so case is kept. Defaults to
	// "forage".
	Schema string

	// Now is the store's clock for the checkpoint contract: lease expiry,
	// Lease.Expires, Checkpoint.UpdatedAt and Gap.Created. It is read to the
	// microsecond (PostgreSQL's timestamptz precision; the rest is
	// truncated), so a time the store returns equals the one it loads later.
	// Processes that share the database should keep their clocks in step
	// (NTP) to within a small fraction of the lease TTL: a clock running
	// ahead takes leases over early, though fencing still stops the old
	// holder's commits. Defaults to time.Now.
	Now func() time.Time

	// NoLeaseSession stops tying stream and job leases to this process's
	// life. By default the stores on one pool share one extra connection,
	// outside the pool, that holds a session-level advisory lock while the
	// process lives; every lease they grant or renew records it, so that
	// when the process dies (kill -9, a crash, a lost machine once the
	// server drops its connection) another process's Acquire takes the
	// stream over at once instead of waiting until the lease expires, and
	// its jobs' leases end at once too: another scheduler's claim takes
	// them over, and they no longer count against their provider's
	// [schedule.Config.MaxPerProvider]. Set NoLeaseSession when the
	// DSN goes through a proxy that pools transactions (PgBouncer with
	// pool_mode=transaction), where a session-level lock does not stay
	// with one client, or when the extra connection cannot be afforded:
	// leases then end only by release or expiry. Defaults to false.
	NoLeaseSession bool
}

// Store keeps everything a [checkpoint.Store] persists, plus the
// providers' records and shares, in one PostgreSQL schema, so that many
// processes on many machines run streams and pace providers together. It
// also commits a checkpoint inside the host's own transaction
// ([Store.CommitTx], [NewTxSink]), so that records and the cursor after
// them become durable together: exactly once.
//
// Run [Store.Migrate] once (any number of times is fine) before use.
// Store is safe for concurrent use; it holds no state of its own beyond
// its configuration and the pool.
type Store struct {
	pool   *pgxpool.Pool
	owned  bool // made by Open: Close closes the pool
	schema string
	now    func() time.Time
	sql    statements
	jobs   jobStore // what Jobs returns
	sess   *session // nil with Config.NoLeaseSession
	closed sync.Once
	listen listener // the watches of share documents (see WatchShares)
}

var _ checkpoint.Store = (*Store)(nil)

// New returns a Store that uses pool and cfg. It performs no I/O: run
// [Store.Migrate] before the first use. The caller keeps ownership of pool.
// It returns an error wrapping [ErrInvalidConfig] if pool is nil or a
// Config field is out of range.
func New(pool *pgxpool.Pool, cfg Config) (*Store, error) {
	if pool == nil {
		return nil, invalid.Must("New's pool", "not be nil: create one with pgxpool.New or use Open", "nil")
	}
	schema, err := cfg.schema()
	if err != nil {
		return nil, err
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	s := &Store{pool: pool, schema: schema, now: now, sql: expand(schema)}
	s.jobs.s = s
	if !cfg.NoLeaseSession {
		s.sess = attachSession(pool) // connects on the first Acquire
	}
	return s, nil
}

// Open connects to the database named by dsn (a postgres:// URL or a
// key=value string, see pgxpool.ParseConfig), checks that it answers, and
// returns a Store on that pool, which [Store.Close] closes. A malformed dsn,
// an unreachable server or refused credentials are errors naming the
// target, with the password redacted.
func Open(ctx context.Context, dsn string, cfg Config) (*Store, error) {
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("pgstore: Open: %w", err)
	}
	if _, err := cfg.schema(); err != nil {
		return nil, err // before connecting
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("pgstore: Open: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgstore: Open: cannot reach %s:%d database %q as %q: %w",
			pc.ConnConfig.Host, pc.ConnConfig.Port, pc.ConnConfig.Database, pc.ConnConfig.User, err)
	}
	s, _ := New(pool, cfg) // validated above
	s.owned = true
	return s, nil
}

// Close closes the pool if [Open] created it; a Store made by [New] leaves
// its pool to the caller. The last store of a pool to close also closes
// the lease session's connection (see [Config.NoLeaseSession]), which ends
// the session: leases it still holds can be taken over at once. Close the
// stores of a pool before the pool. Closing again does nothing. The Store
// must not be used afterwards.
func (s *Store) Close() {
	s.closed.Do(func() {
		s.listen.stopListening()
		if s.sess != nil {
			s.sess.detach()
		}
		if s.owned {
			s.pool.Close()
		}
	})
}

// Pool returns the store's connection pool, for the host's own queries.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Schema returns the schema the store keeps its tables in.
func (s *Store) Schema() string { return s.schema }

// schema returns the schema name cfg selects, or why it is invalid.
func (cfg Config) schema() (string, error) {
	if cfg.Schema == "" {
		return defaultSchema, nil
	}
	if !validSchema(cfg.Schema) {
		return "", invalid.Must("Config.Schema", "be 1 to 63 ASCII letters, digits or underscores, not starting with a digit",
			fmt.Sprintf("%q", cfg.Schema))
	}
	return cfg.Schema, nil
}

// validSchema reports whether name is a plain identifier that fits in
// PostgreSQL's 63-byte name limit.
func validSchema(name string) bool {
	if len(name) == 0 || len(name) > 63 || (name[0] >= '0' && name[0] <= '9') {
		return false
	}
	for _, c := range []byte(name) {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// clock reads the store's clock at the precision PostgreSQL keeps.
func (s *Store) clock() time.Time { return s.now().Truncate(time.Microsecond) }

// enter reports the argument error, if any, and then a done context, so
// that every method checks in the order the contract requires.
func enter(ctx context.Context, argErr error) error {
	if argErr != nil {
		return argErr
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	return nil
}

// fail wraps an error from the database: a missing schema, table or
// function becomes [ErrNotMigrated]; anything else is reported as the I/O
// error it is, naming the operation.
func (s *Store) fail(op string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "3F000", "42P01", "42883": // invalid_schema_name, undefined_table, undefined_function
			return fmt.Errorf("%w: schema %q is missing or incomplete; call (*pgstore.Store).Migrate first (%s: %w)",
				ErrNotMigrated, s.schema, op, err)
		}
	}
	return fmt.Errorf("pgstore: %s: %w", op, err)
}

// failWrite is fail for a write: an I/O error says whether the request
// never left (nothing changed) or the outcome is unknown, as the
// checkpoint contract asks callers to find out with a read.
func (s *Store) failWrite(op string, err error) error {
	var (
		pgErr   *pgconn.PgError
		connErr *pgconn.ConnectError
	)
	switch {
	case errors.Is(err, pgx.ErrTxCommitRollback):
		return s.fail(op+" (the transaction was aborted by an earlier error: nothing committed)", err)
	case errors.As(err, &pgErr):
		return s.fail(op, err)
	case errors.As(err, &connErr) || pgconn.SafeToRetry(err):
		return s.fail(op+" (not sent: nothing changed)", err)
	default:
		return s.fail(op+" (outcome unknown: read before retrying)", err)
	}
}

// querier is what the store needs from a pool or a transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// statements holds every SQL text with the schema filled in, built once by
// New so that the hot paths do no string work.
type statements struct {
	load, commit                                  string
	acquire, renew, release, leaseOf              string
	addGap, listGaps, resolveGap                  string
	addCoverage, coverage                         string
	loadRecord, saveRecord, listRecords           string
	loadShares, insertShares, updateShares        string
	countJobs                                     string
	migrationsTable, migrationsApplied, recordMig string
	upsertJob, getJob, listJobs, updateJob        string
	jobOf, deleteJob                              string
	claimCand, claimLease                         string
}

// expand fills the schema into every statement template.
func expand(schema string) statements {
	r := strings.NewReplacer("{{schema}}", quoteIdent(schema))
	return statements{
		load: r.Replace(loadSQL), commit: r.Replace(commitSQL),
		acquire: r.Replace(acquireSQL), renew: r.Replace(renewSQL), release: r.Replace(releaseSQL),
		leaseOf: r.Replace(leaseOfSQL),
		addGap:  r.Replace(addGapSQL), listGaps: r.Replace(listGapsSQL), resolveGap: r.Replace(resolveGapSQL),
		addCoverage: r.Replace(addCoverageSQL), coverage: r.Replace(coverageSQL),
		loadRecord: r.Replace(loadRecordSQL), saveRecord: r.Replace(saveRecordSQL), listRecords: r.Replace(listRecordsSQL),
		loadShares: r.Replace(loadSharesSQL), insertShares: r.Replace(insertSharesSQL), updateShares: r.Replace(updateSharesSQL),
		countJobs:       r.Replace(countJobsSQL),
		migrationsTable: r.Replace(migrationsTableSQL), migrationsApplied: r.Replace(migrationsAppliedSQL),
		recordMig: r.Replace(recordMigrationSQL),
		upsertJob: r.Replace(upsertJobSQL), getJob: r.Replace(getJobSQL), listJobs: r.Replace(listJobsSQL),
		updateJob: r.Replace(updateJobSQL), jobOf: r.Replace(jobOfSQL), deleteJob: r.Replace(deleteJobSQL),
		claimCand: r.Replace(claimCandSQL), claimLease: r.Replace(claimLeaseSQL),
	}
}

// quoteIdent quotes name as an SQL identifier.
func quoteIdent(name string) string { return pgx.Identifier{name}.Sanitize() }
