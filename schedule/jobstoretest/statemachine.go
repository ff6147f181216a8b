package jobstoretest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/forage-go/forage/schedule"
	"pgregory.net/rapid"
)

// runStateMachine drives a store with random operations and checks every
// result against model, a deliberately naive restatement of the contract:
// a map of jobs, and Claim as "repeatedly take the best eligible job".
func runStateMachine(t *testing.T, newStore storeFunc) {
	rapid.Check(t, func(rt *rapid.T) {
		m := &machine{s: newStore(t), ctx: t.Context(), now: epoch, jobs: map[int64]*schedule.Job{}}
		rt.Repeat(rapid.StateMachineActions(m))
	})
}

// The small alphabets the machine draws from, so that operations collide.
var (
	smProviders = []string{"a", "b", "c"}
	smStreams   = []string{"x", "y"}
	smKinds     = []schedule.Kind{schedule.KindGapFill, schedule.KindIncremental, schedule.KindRefresh, schedule.KindBackfill}
	smStates    = []schedule.State{schedule.StateIdle, schedule.StateQueued, schedule.StateRunning, schedule.StateWaitingRateLimit, schedule.StateSuccess, schedule.StateFailed, schedule.StatePaused}
	smOwners    = []string{"o1", "o2"}
	smOffsets   = []time.Duration{-time.Minute, -10 * time.Second, 0, 10 * time.Second, time.Minute}
	smPrios     = []int{0, 10, 20, 40}
)

// machine is the state-machine test: the store under test and the model.
type machine struct {
	s      schedule.JobStore
	ctx    context.Context
	now    time.Time
	step   int
	jobs   map[int64]*schedule.Job
	lastID int64
}

// Check compares every stored job with the model after every action.
func (m *machine) Check(t *rapid.T) {
	m.step++
	got, err := m.s.List(m.ctx, schedule.Query{})
	if err != nil {
		t.Fatalf("step %d: List: %v", m.step, err)
	}
	want := make([]schedule.Job, 0, len(m.jobs))
	for _, id := range slices.Sorted(maps.Keys(m.jobs)) {
		want = append(want, *m.jobs[id])
	}
	if d := cmpDiff(want, got); d != "" {
		t.Fatalf("step %d: stored jobs differ from the model (-model +store):\n%s", m.step, d)
	}
}

func (m *machine) check(t *rapid.T, op string, err, want error) {
	t.Helper()
	if (want == nil) != (err == nil) || (want != nil && !errors.Is(err, want)) {
		t.Fatalf("step %d: %s: got error %v, want %v", m.step, op, err, want)
	}
}

func (m *machine) pick(t *rapid.T) *schedule.Job {
	if len(m.jobs) == 0 {
		t.Skip("no job yet")
	}
	id := rapid.SampledFrom(slices.Sorted(maps.Keys(m.jobs))).Draw(t, "id")
	return m.jobs[id]
}

// Advance moves time forward.
func (m *machine) Advance(t *rapid.T) {
	m.now = m.now.Add(rapid.SampledFrom([]time.Duration{0, time.Second, 10 * time.Second, 30 * time.Second, 90 * time.Second}).Draw(t, "advance"))
}

// Upsert adds a job or redefines one.
func (m *machine) Upsert(t *rapid.T) {
	j := schedule.Job{
		Provider: rapid.SampledFrom(smProviders).Draw(t, "provider"),
		Kind:     rapid.SampledFrom(smKinds).Draw(t, "kind"),
		Stream:   rapid.SampledFrom(smStreams).Draw(t, "stream"),
		Priority: rapid.SampledFrom(smPrios).Draw(t, "priority"),
		Interval: time.Duration(rapid.IntRange(0, 3).Draw(t, "interval")) * time.Minute,
		Payload:  rapid.SliceOfN(rapid.Byte(), 0, 4).Draw(t, "payload"),
		State:    schedule.StateIdle,
		NextRun:  m.now.Add(rapid.SampledFrom(smOffsets).Draw(t, "next")),
		Created:  m.now, Updated: m.now,
	}
	got, err := m.s.Upsert(m.ctx, j)
	op := fmt.Sprintf("Upsert(%s/%s/%s)", j.Provider, j.Kind, j.Stream)
	m.check(t, op, err, nil)
	for _, old := range m.jobs {
		if old.Provider == j.Provider && old.Kind == j.Kind && old.Stream == j.Stream {
			old.Priority, old.Interval, old.Payload, old.Updated = j.Priority, j.Interval, j.Payload, j.Updated
			old.Version++
			m.same(t, op, *old, got)
			return
		}
	}
	if got.ID <= m.lastID {
		t.Fatalf("step %d: %s: new ID %d, want > %d", m.step, op, got.ID, m.lastID)
	}
	j.ID, j.Version = got.ID, 1
	m.lastID = got.ID
	m.jobs[j.ID] = &j
	m.same(t, op, j, got)
}

// Update rewrites a job's runtime fields, from its current version or a
// stale one.
func (m *machine) Update(t *rapid.T) {
	cur := m.pick(t)
	j := *cur
	j.State = rapid.SampledFrom(smStates).Draw(t, "state")
	j.NextRun = m.now.Add(rapid.SampledFrom(smOffsets).Draw(t, "next"))
	j.Priority = rapid.SampledFrom(smPrios).Draw(t, "priority")
	j.Stats.Runs++
	j.Updated = m.now
	j.Lease = schedule.JobLease{}
	if rapid.Bool().Draw(t, "leased") {
		j.Lease = schedule.JobLease{Owner: rapid.SampledFrom(smOwners).Draw(t, "owner"), Until: m.now.Add(rapid.SampledFrom(smOffsets).Draw(t, "until"))}
	}
	stale := cur.Version > 1 && rapid.IntRange(0, 4).Draw(t, "stale") == 0
	if stale {
		j.Version--
	}
	sent := j
	if rapid.Bool().Draw(t, "taken from") {
		sent.Lease.TakenFrom = "o9" // a Claim's result sent back: not stored
	}
	got, err := m.s.Update(m.ctx, sent)
	op := fmt.Sprintf("Update(%d, version %d)", j.ID, j.Version)
	if stale {
		m.check(t, op, err, schedule.ErrConflict)
		return
	}
	m.check(t, op, err, nil)
	j.Version++
	*cur = j
	m.same(t, op, j, got)
}

// Delete removes a job, or tries an ID that does not exist.
func (m *machine) Delete(t *rapid.T) {
	if len(m.jobs) == 0 || rapid.IntRange(0, 5).Draw(t, "unknown") == 0 {
		err := m.s.Delete(m.ctx, m.lastID+1000)
		m.check(t, "Delete(unknown)", err, schedule.ErrNotFound)
		return
	}
	j := m.pick(t)
	m.check(t, fmt.Sprintf("Delete(%d)", j.ID), m.s.Delete(m.ctx, j.ID), nil)
	delete(m.jobs, j.ID)
}

// Get reads one job.
func (m *machine) Get(t *rapid.T) {
	j := m.pick(t)
	got, err := m.s.Get(m.ctx, j.ID)
	m.check(t, "Get", err, nil)
	m.same(t, fmt.Sprintf("Get(%d)", j.ID), *j, got)
}

// Claim claims with a random filter and compares with the model's claim.
func (m *machine) Claim(t *rapid.T) {
	owner := rapid.SampledFrom(smOwners).Draw(t, "owner")
	ttl := rapid.SampledFrom([]time.Duration{10 * time.Second, time.Minute}).Draw(t, "ttl")
	limit := rapid.IntRange(1, 5).Draw(t, "limit")
	var skip, noTail []string
	for _, p := range smProviders {
		if rapid.IntRange(0, 3).Draw(t, "skip "+p) == 0 {
			skip = append(skip, p)
		}
		if rapid.IntRange(0, 3).Draw(t, "no tail "+p) == 0 {
			noTail = append(noTail, p)
		}
	}
	f := schedule.ClaimFilter{
		Skip:        skip,
		PerProvider: rapid.IntRange(0, 3).Draw(t, "per provider"),
		Aging:       rapid.SampledFrom([]time.Duration{0, 30 * time.Second, time.Minute}).Draw(t, "aging"),
	}
	if len(noTail) > 0 {
		f.Tail = func(p string) bool { return !slices.Contains(noTail, p) }
	}
	want := m.claim(owner, ttl, limit, f)
	got, err := m.s.Claim(m.ctx, m.now, owner, ttl, limit, f)
	op := fmt.Sprintf("Claim(at %v, %s, limit %d, skip %v, per provider %d, aging %v, no tail %v)",
		m.now.Sub(epoch), owner, limit, skip, f.PerProvider, f.Aging, noTail)
	m.check(t, op, err, nil)
	m.same(t, op, want, got)
}

// claim is the model of Claim: take the best eligible job, again and
// again, re-evaluating eligibility after each take.
func (m *machine) claim(owner string, ttl time.Duration, limit int, f schedule.ClaimFilter) []schedule.Job {
	var out []schedule.Job
	for len(out) < limit {
		var best *schedule.Job
		for _, j := range m.jobs {
			if m.eligible(j, f) && (best == nil || ranksBefore(j, best, f.Aging)) {
				best = j
			}
		}
		if best == nil {
			break
		}
		from := best.Lease.Owner // empty or expired: the lease taken over
		best.State, best.Lease, best.Updated = schedule.StateRunning, schedule.JobLease{Owner: owner, Until: m.now.Add(ttl)}, m.now
		best.Version++
		c := *best
		c.Lease.TakenFrom = from
		out = append(out, c)
	}
	return out
}

func (m *machine) eligible(j *schedule.Job, f schedule.ClaimFilter) bool {
	if !due(j, m.now) || slices.Contains(f.Skip, j.Provider) || m.streamBusy(j) {
		return false
	}
	leased, headBusy := 0, false
	for _, o := range m.jobs {
		if o.Provider != j.Provider {
			continue
		}
		if held(o.Lease, m.now) {
			leased++
		}
		if head(o.Kind) && active(o.State) && (due(o, m.now) && !m.streamBusy(o) || held(o.Lease, m.now)) {
			headBusy = true
		}
	}
	if f.PerProvider > 0 && leased >= f.PerProvider {
		return false
	}
	if !head(j.Kind) && (headBusy || (f.Tail != nil && !f.Tail(j.Provider))) {
		return false
	}
	return true
}

// streamBusy reports whether another job of j's provider and stream holds
// a live lease.
func (m *machine) streamBusy(j *schedule.Job) bool {
	for _, o := range m.jobs {
		if o.ID != j.ID && o.Provider == j.Provider && o.Stream == j.Stream && held(o.Lease, m.now) {
			return true
		}
	}
	return false
}

// ranksBefore restates the contract's order.
func ranksBefore(a, b *schedule.Job, aging time.Duration) bool {
	c := 0
	if aging > 0 {
		c = a.NextRun.Add(time.Duration(a.Priority) * aging).Compare(b.NextRun.Add(time.Duration(b.Priority) * aging))
	}
	if c == 0 {
		c = cmp.Compare(a.Priority, b.Priority)
	}
	if c == 0 {
		c = a.NextRun.Compare(b.NextRun)
	}
	if c == 0 {
		c = cmp.Compare(a.ID, b.ID)
	}
	return c < 0
}

func (m *machine) same(t *rapid.T, op string, want, got any) {
	t.Helper()
	if d := cmpDiff(want, got); d != "" {
		t.Fatalf("step %d: %s mismatch (-model +store):\n%s", m.step, op, d)
	}
}

// held reports whether lease l is live at now.
func held(l schedule.JobLease, now time.Time) bool { return l.Owner != "" && now.Before(l.Until) }

// head reports whether k is head work: anything but a backfill.
func head(k schedule.Kind) bool { return k != schedule.KindBackfill }

// active reports whether a job in state st may be claimed once due: every
// state but paused and success.
func active(st schedule.State) bool {
	switch st {
	case schedule.StateIdle, schedule.StateQueued, schedule.StateRunning, schedule.StateWaitingRateLimit, schedule.StateFailed:
		return true
	}
	return false
}

// due reports whether j may be claimed at now (see [schedule.JobStore.Claim]):
// its state is active, NextRun has come, and no live lease holds it.
func due(j *schedule.Job, now time.Time) bool {
	return active(j.State) && !j.NextRun.After(now) && !held(j.Lease, now)
}
