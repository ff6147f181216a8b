package pgstore

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/forage-go/forage/schedule"
	"github.com/jackc/pgx/v5"
)

// A claim is one READ COMMITTED transaction:
//
//  1. claim_candidates (a function of the schema, see 004_jobs.sql) ranks
//     the providers by their best eligible job and locks the rows of the
//     best ones in job_providers, FOR UPDATE SKIP LOCKED: a provider another
//     claim holds is skipped, never waited for. From then on, until the
//     commit, no other claim takes jobs of these providers, so their
//     live-lease counts and head-first state cannot change under this one.
//     With a fresh snapshot it returns their candidates: each provider's
//     best eligible jobs, one per stream (008_one_job_per_stream.sql), no
//     more than its free slots.
//  2. Go merges the candidates in rank order and asks ClaimFilter.Tail
//     about a provider's backfills when the walk first reaches one. While
//     a provider locked turns out to give nothing (its backfills refused by
//     Tail, or its jobs gone since it was ranked), step 1 runs again for
//     more providers.
//  3. claimLeaseSQL leases the chosen jobs (FOR UPDATE SKIP LOCKED again,
//     rechecking that each is still claimable) and returns them. Each
//     lease records the process's session (session.go), so that it ends
//     when the process dies: a lease whose session has ended counts as
//     ended everywhere a claim looks (013_job_lease_session.sql).
//
// Without concurrent claims the result is exactly the contract's greedy
// choice: the jobs taken come from the best providers, all of them locked.

var (
	// claimCandSQL runs step 1. Parameters: now, the providers to leave
	// out, the per-provider cap, how many providers to lock, the claim's
	// limit, the aging in nanoseconds.
	claimCandSQL = `SELECT id, provider, tail, priority, ` + finite("next_run") + ` FROM {{schema}}.claim_candidates($1, $2, $3, $4, $5, $6)`

	// claimLeaseSQL leases the jobs $2 to owner $3 until $4, tied to the
	// session $5 (NULL for none), if each is still claimable at $1 (no
	// other job of its stream leased) and not locked by another writer,
	// and returns each with the owner of the ended lease it took over
	// (expired, or its holder's session gone: see job_lease_ended in
	// 013_job_lease_session.sql).
	claimLeaseSQL = `
WITH c AS (
	SELECT j.id AS claim_id, j.lease_owner AS taken_from FROM {{schema}}.jobs j
	WHERE j.id = ANY($2::bigint[]) AND j.state NOT IN ('paused', 'success') AND j.next_run <= $1
		AND (j.lease_owner IS NULL OR {{schema}}.job_lease_ended(j.lease_until, j.lease_session, $1))
		AND NOT EXISTS (SELECT 1 FROM {{schema}}.jobs o WHERE o.provider = j.provider AND o.stream = j.stream
			AND o.id <> j.id AND o.lease_owner IS NOT NULL AND o.lease_until > $1
			AND NOT {{schema}}.job_lease_ended(o.lease_until, o.lease_session, $1))
	FOR UPDATE SKIP LOCKED
)
UPDATE {{schema}}.jobs SET state = 'running', lease_owner = $3, lease_until = $4, lease_session = $5::bigint,
	updated = $1, version = version + 1
FROM c WHERE id = c.claim_id
RETURNING ` + jobCols + `, c.taken_from`
)

// candidate is a job a claim may take.
type candidate struct {
	id       int64
	provider string
	backfill bool
	priority int
	nextRun  time.Time
	rank     time.Time // NextRun + Priority × Aging; zero without aging
}

// compare orders candidates as the contract ranks them: rank, Priority,
// NextRun, ID.
func (c *candidate) compare(d *candidate) int {
	if x := c.rank.Compare(d.rank); x != 0 {
		return x
	}
	if x := cmp.Compare(c.priority, d.priority); x != 0 {
		return x
	}
	if x := c.nextRun.Compare(d.nextRun); x != 0 {
		return x
	}
	return cmp.Compare(c.id, d.id)
}

// What a claim knows about a provider it locked.
const (
	provTail   = iota // its candidates are backfills; Tail not asked yet
	provUseful        // it gives jobs
	provNone          // it gives nothing: no candidates, or Tail said no
)

// Claim implements [schedule.JobStore.Claim] in one transaction, with no
// database clock: now and the lease's end are parameters. Claims on
// different providers run in parallel; a provider another claim is
// taking jobs from is skipped, never waited for, so Claim never blocks
// on another claim and may return fewer jobs than are due while others
// claim. A claim that fails at the commit may have leased its jobs
// without returning them: they run again once the lease expires.
//
// Besides an expired lease, Claim takes over at once a lease whose
// holder's process has died, naming its owner in Lease.TakenFrom; until it is
// taken over, such a lease no longer counts against
// [schedule.ClaimFilter.PerProvider] nor holds its stream's other jobs
// back. A lease is tied to the process by the session of
// [Config.NoLeaseSession] (which turns it off), as a stream's lease is.
func (js *jobStore) Claim(ctx context.Context, now time.Time, owner string, ttl time.Duration, limit int, f schedule.ClaimFilter) ([]schedule.Job, error) {
	if err := enter(ctx, checkClaim(now, owner, ttl, limit, &f)); err != nil {
		return nil, err
	}
	s := js.s
	now = now.Truncate(time.Microsecond)
	until := now.Add(ttl).Truncate(time.Microsecond)
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return nil, s.fail("Claim", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	ids, err := js.choose(ctx, tx, now, limit, &f)
	if err != nil {
		return nil, s.fail("Claim", err)
	}
	if len(ids) == 0 {
		return nil, nil // the deferred rollback releases the provider locks
	}
	// The session is asked for only now, when there are jobs to lease: an
	// empty claim, the common case, costs nothing more.
	rows, err := tx.Query(ctx, s.sql.claimLease, now, ids, owner, until, s.sessionKey(ctx))
	if err != nil {
		return nil, s.fail("Claim", err)
	}
	leased, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (schedule.Job, error) {
		var from *string
		j, err := scanJob(r, &from)
		if from != nil {
			j.Lease.TakenFrom = *from
		}
		return j, err
	})
	if err != nil {
		return nil, s.fail("Claim", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, s.failWrite("Claim (commit)", err)
	}
	// In the order taken; a job changed by another writer since it was
	// chosen is missing.
	byID := make(map[int64]int, len(leased))
	for i, j := range leased {
		byID[j.ID] = i
	}
	out := make([]schedule.Job, 0, len(leased))
	for _, id := range ids {
		if i, ok := byID[id]; ok {
			out = append(out, leased[i])
		}
	}
	return out, nil
}

// choose locks providers and picks the IDs to lease, in the order taken:
// the greedy choice of the contract over the locked providers, which
// include the best ones.
func (js *jobStore) choose(ctx context.Context, tx pgx.Tx, now time.Time, limit int, f *schedule.ClaimFilter) ([]int64, error) {
	excluded := make([]string, 0, len(f.Skip)+limit)
	for _, p := range f.Skip {
		if storable(p) { // any other matches no stored provider
			excluded = append(excluded, p)
		}
	}
	known := map[string]int{} // locked provider → provTail, provUseful or provNone
	var cands []candidate
	more := true
	for {
		need := limit - countNot(known, provNone)
		if need > 0 && more {
			var (
				locked []string
				err    error
			)
			args := []any{now, excluded, f.PerProvider, need, limit, int64(f.Aging)}
			if cands, locked, err = js.candidates(ctx, tx, args, cands, known, f); err != nil {
				return nil, err
			}
			excluded = append(excluded, locked...)
			more = len(locked) == need
		}
		ids := walk(cands, limit, known, f.Tail)
		// Done when the locked providers that may give jobs are as many as
		// the jobs wanted (no provider not locked can rank among them), or
		// when no more provider can be locked. (need <= 0 only guards: with
		// that many providers known to give, the walk took limit jobs.)
		if len(ids) == limit && countNot(known, provNone) >= limit || !more || need <= 0 {
			return ids, nil
		}
	}
}

// candidates runs step 1 of a claim, adds the candidates to cands in rank
// order, records what each provider locked may give, and returns the
// providers locked.
func (js *jobStore) candidates(ctx context.Context, tx pgx.Tx, args []any, cands []candidate,
	known map[string]int, f *schedule.ClaimFilter) ([]candidate, []string, error) {
	rows, err := tx.Query(ctx, js.s.sql.claimCand, args...)
	if err != nil {
		return nil, nil, err
	}
	var (
		locked   []string
		id       *int64
		provider string
		backfill *bool
		priority *int
		nextRun  *time.Time
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &provider, &backfill, &priority, &nextRun}, func() error {
		if id == nil { // a provider locked; its candidates came first
			locked = append(locked, provider)
			if _, ok := known[provider]; !ok {
				known[provider] = provNone
			}
			return nil
		}
		c := candidate{id: *id, provider: provider, backfill: *backfill, priority: *priority, nextRun: *nextRun}
		if f.Aging > 0 {
			c.rank = c.nextRun.Add(time.Duration(c.priority) * f.Aging)
		}
		cands = append(cands, c)
		// A provider's candidates are all head jobs or all backfills.
		if c.backfill && f.Tail != nil {
			known[provider] = provTail
		} else {
			known[provider] = provUseful
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	slices.SortFunc(cands, func(a, b candidate) int { return a.compare(&b) })
	return cands, locked, nil
}

// walk takes candidates in rank order, up to limit, skipping the providers
// that give nothing and asking tail about a provider's backfills when it
// first reaches one.
func walk(cands []candidate, limit int, known map[string]int, tail func(string) bool) []int64 {
	var ids []int64
	for i := range cands {
		if len(ids) == limit {
			break
		}
		c := &cands[i]
		switch known[c.provider] {
		case provNone:
			continue
		case provTail:
			if !tail(c.provider) {
				known[c.provider] = provNone
				continue
			}
			known[c.provider] = provUseful
		}
		ids = append(ids, c.id)
	}
	return ids
}

// countNot counts the providers in known whose state is not st.
func countNot(known map[string]int, st int) int {
	n := 0
	for _, v := range known {
		if v != st {
			n++
		}
	}
	return n
}
