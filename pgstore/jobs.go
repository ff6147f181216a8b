package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/forage-go/forage/schedule"
	"github.com/jackc/pgx/v5"
)

// jobStore is the [schedule.JobStore] of a [Store]; see [Store.Jobs].
type jobStore struct {
	s *Store
}

var _ schedule.JobStore = (*jobStore)(nil)

// Jobs returns the store's [schedule.JobStore], which shares its pool and
// schema ([Store.Migrate] creates its tables with the others): jobs in the
// store's schema, claimed with SELECT … FOR UPDATE SKIP LOCKED, so that
// schedulers in many processes share one set of jobs, each job runs in one
// place at a time, and the jobs of a crashed scheduler run again: at once
// when its process died (its leases are tied to the process's session, see
// [Config.NoLeaseSession]), else once their leases expire. Such a lease,
// ended early, reads as ended too: the jobs returned carry an Until already
// past (the job's last write), so [schedule.Scheduler.RunNow] queues the
// job at once. It passes the jobstoretest suite unchanged, and it also
// counts its jobs in one statement (a Count(ctx) (int, error) method,
// which the admin handler's MaxJobs check uses).
//
// Times are kept to the microsecond (PostgreSQL's timestamptz); the rest
// is truncated, and the jobs returned carry the times as stored (but for
// such a lease's end). Provider,
// Stream and Lease.Owner must be valid UTF-8 without NUL bytes (the
// database stores text); Stats.LastError, a diagnostic, is stored with
// invalid bytes replaced by U+FFFD and NUL bytes dropped.
//
// The job store is safe for concurrent use; like Store, it holds no state
// of its own.
func (s *Store) Jobs() schedule.JobStore { return &s.jobs }

// jobCols are the columns of a job, in the order scanJob reads them; its
// times read finite (see finite), and its lease's end as leaseUntil says.
var jobCols = `id, provider, kind, stream, priority, interval_ns, payload, state, ` + finite("next_run") + `,
	runs, successes, failures, streak, last_error, ` + finite("last_run") + `, ` + finite("last_success") + `, lease_owner, ` + leaseUntil + `,
	version, ` + finite("created") + `, ` + finite("updated")

// leaseUntil reads a job's Lease.Until as every method reports it: as
// stored, unless the lease records a session that has ended (its holder's
// process is gone, see session.go and migration 013), which a claim takes
// over at once whatever the lease's end. Such a lease reads as ended at
// the job's last write (Updated; the stored end if that is earlier), a
// time already past, so that what a caller decides from a job it read
// agrees with the claim: an operator's RunNow queues the job instead of
// answering ErrRunning until the dead lease expires, a snapshot no longer
// counts it as running, and its holder, should it live on without its
// session (the connection broke), finds at its next renewal the lease
// lost, as its own next claim would have found it taken over. The store
// reads no clock: whether the session has ended is one
// pg_try_advisory_xact_lock of its key per leased row read (a live
// holder's try fails and takes nothing; a dead one's lock goes with the
// statement), as the claim tries it.
var leaseUntil = `CASE WHEN lease_owner IS NOT NULL AND lease_session IS NOT NULL AND pg_try_advisory_xact_lock(lease_session)
	THEN ` + finite("LEAST(updated, lease_until)") + ` ELSE ` + finite("lease_until") + ` END`

// finite reads the timestamptz column col as a time Go can hold: a row
// edited by hand to 'infinity' (a common way to park a row in SQL) as the
// year 9999, and '-infinity' as the year 1, never due and due at once.
// Scanned as they are, one such row failed every claim and every listing
// of every provider's jobs.
func finite(col string) string {
	return "CASE WHEN " + col + " IS NULL OR isfinite(" + col + ") THEN " + col + " WHEN " + col +
		" > 'epoch' THEN '9999-12-31 00:00:00+00'::timestamptz ELSE '0001-01-01 00:00:00+00'::timestamptz END"
}

// upsertJobSQL inserts a job, or redefines the job with the same identity,
// in one statement; it also makes sure the provider has its row in
// job_providers, which claims lock. Parameters: the fields of jobArgs.
var upsertJobSQL = `
WITH p AS (
	INSERT INTO {{schema}}.job_providers (provider) VALUES ($1::text) ON CONFLICT DO NOTHING
)
INSERT INTO {{schema}}.jobs AS j (provider, kind, stream, priority, interval_ns, payload, state, next_run,
	runs, successes, failures, streak, last_error, last_run, last_success, lease_owner, lease_until,
	version, created, updated)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, 1, $18, $19)
ON CONFLICT ON CONSTRAINT jobs_identity DO UPDATE SET priority = excluded.priority,
	interval_ns = excluded.interval_ns, payload = excluded.payload, updated = excluded.updated,
	version = j.version + 1
RETURNING ` + jobCols

// updateJobSQL is Update's compare-and-swap: it writes the mutable fields
// only if the version and the identity match. The lease's session is the
// writer's ($21) when the write extends the lease or gives it a new owner
// (a renewal, which records the key as it is now, a new one after the
// session's connection was replaced), none when it clears it (a release),
// and stays as it was when the lease is written back no longer than
// stored (an operator's change to a running job keeps the lease tied to
// its holder, not to the operator's process; so does a RunNow of a dead
// holder's job, whose lease reads as ended earlier, see leaseUntil).
// Parameters: ID, expected version, then jobArgs without Created, then the
// writer's session key (NULL for none).
var updateJobSQL = `
UPDATE {{schema}}.jobs SET priority = $6, interval_ns = $7, payload = $8, state = $9, next_run = $10,
	runs = $11, successes = $12, failures = $13, streak = $14, last_error = $15, last_run = $16,
	last_success = $17, lease_owner = $18, lease_until = $19, updated = $20, version = version + 1,
	lease_session = CASE WHEN $18::text IS NULL THEN NULL
		WHEN lease_owner = $18 AND lease_until >= $19::timestamptz THEN lease_session
		ELSE $21::bigint END
WHERE id = $1 AND version = $2 AND provider = $3 AND kind = $4 AND stream = $5
RETURNING ` + jobCols

// jobOfSQL reads what a failed Update needs to say why it failed.
const jobOfSQL = `SELECT provider, kind, stream, version FROM {{schema}}.jobs WHERE id = $1`

var (
	getJobSQL    = `SELECT ` + jobCols + ` FROM {{schema}}.jobs WHERE id = $1`
	deleteJobSQL = `DELETE FROM {{schema}}.jobs WHERE id = $1`
	// listJobsSQL is the head of List; the filters and the limit are
	// appended per query.
	listJobsSQL  = `SELECT ` + jobCols + ` FROM {{schema}}.jobs WHERE id > $1`
	countJobsSQL = `SELECT count(*) FROM {{schema}}.jobs`
)

// Count returns how many jobs the store holds: one statement, so that the
// admin handler ([github.com/forage-go/forage/admin.New]) checks its
// MaxJobs cap without listing every job.
func (js *jobStore) Count(ctx context.Context) (int, error) {
	if err := enter(ctx, nil); err != nil {
		return 0, err
	}
	var n int
	if err := js.s.pool.QueryRow(ctx, js.s.sql.countJobs).Scan(&n); err != nil {
		return 0, js.s.fail("Count", err)
	}
	return n, nil
}

// Upsert implements [schedule.JobStore.Upsert] with one INSERT … ON
// CONFLICT on (provider, kind, stream): of concurrent upserts of one new
// identity, one inserts and the others update.
func (js *jobStore) Upsert(ctx context.Context, job schedule.Job) (schedule.Job, error) {
	if err := enter(ctx, checkJob(&job)); err != nil {
		return schedule.Job{}, err
	}
	s := js.s
	args := jobArgs(&job)
	got, err := scanJob(s.pool.QueryRow(ctx, s.sql.upsertJob, args[:]...))
	if err != nil {
		return schedule.Job{}, s.failWrite("Upsert job "+identity(&job), err)
	}
	return got, nil
}

// Get implements [schedule.JobStore.Get].
func (js *jobStore) Get(ctx context.Context, id int64) (schedule.Job, error) {
	if err := enter(ctx, checkID("id", id)); err != nil {
		return schedule.Job{}, err
	}
	s := js.s
	j, err := scanJob(s.pool.QueryRow(ctx, s.sql.getJob, id))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return schedule.Job{}, fmt.Errorf("%w: id %d", schedule.ErrNotFound, id)
	case err != nil:
		return schedule.Job{}, s.fail("Get job "+strconv.FormatInt(id, 10), err)
	}
	return j, nil
}

// List implements [schedule.JobStore.List]: one query, in ID order, with
// only the filters q sets, so each shape gets a plan of its own.
func (js *jobStore) List(ctx context.Context, q schedule.Query) ([]schedule.Job, error) {
	if err := enter(ctx, q.Validate()); err != nil {
		return nil, err
	}
	if !storable(q.Provider) || !storable(q.Stream) {
		return nil, nil // no stored job has them
	}
	s := js.s
	var sb strings.Builder
	sb.WriteString(s.sql.listJobs)
	args := []any{q.After}
	for _, f := range [...]struct{ col, val string }{
		{"provider", q.Provider}, {"kind", string(q.Kind)}, {"state", string(q.State)}, {"stream", q.Stream},
	} {
		if f.val != "" {
			args = append(args, f.val)
			fmt.Fprintf(&sb, " AND %s = $%d", f.col, len(args))
		}
	}
	sb.WriteString(" ORDER BY id")
	if q.Limit > 0 {
		args = append(args, q.Limit)
		fmt.Fprintf(&sb, " LIMIT $%d", len(args))
	}
	rows, err := s.pool.Query(ctx, sb.String(), args...)
	if err != nil {
		return nil, s.fail("List jobs", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (schedule.Job, error) { return scanJob(r) })
	if err != nil {
		return nil, s.fail("List jobs", err)
	}
	return out, nil
}

// Update implements [schedule.JobStore.Update] as one compare-and-swap
// UPDATE; only when it matches nothing does a second read find out why
// (ErrNotFound, ErrInvalid for another identity, ErrConflict).
func (js *jobStore) Update(ctx context.Context, job schedule.Job) (schedule.Job, error) {
	argErr := checkID("Job.ID", job.ID)
	if argErr == nil {
		argErr = checkJob(&job)
	}
	if err := enter(ctx, argErr); err != nil {
		return schedule.Job{}, err
	}
	s := js.s
	op := "Update job " + strconv.FormatInt(job.ID, 10)
	a := jobArgs(&job)
	// The identity, then the mutable fields: all but Created; then the
	// session a lease written records (asked for only when there is one).
	var sess *int64
	if job.Lease.Owner != "" {
		sess = s.sessionKey(ctx)
	}
	args := append(append([]any{job.ID, job.Version}, a[:17]...), a[18], sess)
	got, err := scanJob(s.pool.QueryRow(ctx, s.sql.updateJob, args...))
	if err == nil {
		return got, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return schedule.Job{}, s.failWrite(op, err)
	}
	var cur schedule.Job
	err = s.pool.QueryRow(ctx, s.sql.jobOf, job.ID).Scan(&cur.Provider, &cur.Kind, &cur.Stream, &cur.Version)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return schedule.Job{}, fmt.Errorf("%w: id %d", schedule.ErrNotFound, job.ID)
	case err != nil:
		return schedule.Job{}, s.fail(op, err)
	case cur.Provider != job.Provider || cur.Kind != job.Kind || cur.Stream != job.Stream:
		return schedule.Job{}, fmt.Errorf("%w: job %d is %s, not %s", schedule.ErrInvalid, job.ID, identity(&cur), identity(&job))
	}
	return schedule.Job{}, fmt.Errorf("%w: job %d is at version %d, not %d", schedule.ErrConflict, job.ID, cur.Version, job.Version)
}

// Delete implements [schedule.JobStore.Delete]. The provider's row in
// job_providers stays: it is one small row, and claims skip providers
// without due jobs.
func (js *jobStore) Delete(ctx context.Context, id int64) error {
	if err := enter(ctx, checkID("id", id)); err != nil {
		return err
	}
	s := js.s
	tag, err := s.pool.Exec(ctx, s.sql.deleteJob, id)
	if err != nil {
		return s.failWrite("Delete job "+strconv.FormatInt(id, 10), err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: id %d", schedule.ErrNotFound, id)
	}
	return nil
}

// jobArgs returns job's columns as statement parameters, in the order of
// upsertJobSQL: the identity, the definition, the runtime fields, Created
// and Updated. checkJob has truncated the times and cleaned LastError.
func jobArgs(j *schedule.Job) [19]any {
	until := optTime(j.Lease.Until)
	if j.Lease.Owner != "" {
		until = j.Lease.Until // never NULL under an owner, even truncated to the zero time
	}
	return [...]any{
		j.Provider, string(j.Kind), j.Stream, int32(j.Priority), int64(j.Interval), j.Payload,
		string(j.State), j.NextRun, j.Stats.Runs, j.Stats.Successes, j.Stats.Failures, int64(j.Stats.Streak),
		j.Stats.LastError, optTime(j.Stats.LastRun), optTime(j.Stats.LastSuccess),
		optText(j.Lease.Owner), until, j.Created, j.Updated,
	}
}

// scanJob reads the columns of jobCols, then into extra, if any.
func scanJob(row pgx.Row, extra ...any) (schedule.Job, error) {
	var (
		j                              schedule.Job
		kind, state                    string
		interval, streak               int64
		lastRun, lastSuccess, leaseEnd *time.Time
		owner                          *string
	)
	err := row.Scan(append([]any{&j.ID, &j.Provider, &kind, &j.Stream, &j.Priority, &interval, &j.Payload, &state, &j.NextRun,
		&j.Stats.Runs, &j.Stats.Successes, &j.Stats.Failures, &streak, &j.Stats.LastError, &lastRun, &lastSuccess,
		&owner, &leaseEnd, &j.Version, &j.Created, &j.Updated}, extra...)...)
	if err != nil {
		return schedule.Job{}, err
	}
	j.Kind, j.State, j.Interval, j.Stats.Streak = schedule.Kind(kind), schedule.State(state), time.Duration(interval), int(streak)
	if lastRun != nil {
		j.Stats.LastRun = *lastRun
	}
	if lastSuccess != nil {
		j.Stats.LastSuccess = *lastSuccess
	}
	if owner != nil {
		j.Lease.Owner = *owner
	}
	if leaseEnd != nil {
		j.Lease.Until = *leaseEnd
	}
	return j, nil
}

// optTime is t as a parameter, NULL for the zero time.
func optTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// optText is s as a parameter, NULL for the empty string.
func optText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// identity formats a job's (provider, kind, stream) for messages.
func identity(j *schedule.Job) string {
	return fmt.Sprintf("(%q, %s, %q)", j.Provider, j.Kind, j.Stream)
}
