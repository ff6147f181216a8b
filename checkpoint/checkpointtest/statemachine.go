package checkpointtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/forage-go/forage/checkpoint"
	"pgregory.net/rapid"
)

// runStateMachine drives a store with random operations and checks every
// result against model, a deliberately naive restatement of the contract.
func runStateMachine(t *testing.T, newStore storeFunc) {
	rapid.Check(t, func(rt *rapid.T) {
		c := &clock{}
		m := &machine{
			s: newStore(t, c.Now), clock: c, ctx: t.Context(),
			streams: map[string]*modelStream{}, cover: map[string]map[int]bool{},
		}
		rt.Repeat(rapid.StateMachineActions(m))
	})
}

// The small alphabets the machine draws from, so that operations collide.
var (
	smStreams = []string{"a", "b", "c"}
	smOwners  = []string{"o1", "o2", "o3"}
	smSeries  = []string{"x", "y"}
	smTTLs    = []time.Duration{time.Second, 10 * time.Second, time.Minute}
	smModes   = []checkpoint.Mode{checkpoint.CatchUp, checkpoint.SteadyState}
	smReasons = []string{"request_cap", "deadline", "throttled"}
)

// machine is the state-machine test: the store under test and the model.
type machine struct {
	s     checkpoint.Store
	clock *clock
	ctx   context.Context
	step  int

	streams map[string]*modelStream
	grants  []checkpoint.Lease // every lease ever granted, for stale use
	open    []checkpoint.Gap   // unresolved gaps, by ID
	issued  []int64            // every gap ID issued
	cover   map[string]map[int]bool
}

// modelStream is the model of one stream.
type modelStream struct {
	cps      [3]checkpoint.Checkpoint
	lease    checkpoint.Lease // the latest grant
	released bool
}

func (m *machine) stream(name string) *modelStream {
	if m.streams[name] == nil {
		m.streams[name] = &modelStream{}
	}
	return m.streams[name]
}

func (ms *modelStream) held() bool { return ms.lease.Token != 0 && !ms.released }

// check compares the store's error with the model's expectation.
func (m *machine) check(t *rapid.T, op string, err, want error) {
	t.Helper()
	if (want == nil) != (err == nil) || (want != nil && !errors.Is(err, want)) {
		t.Fatalf("step %d: %s: got error %v, want %v", m.step, op, err, want)
	}
}

func (m *machine) same(t *rapid.T, op string, want, got any) {
	t.Helper()
	if d := cmpDiff(want, got); d != "" {
		t.Fatalf("step %d: %s mismatch (-model +store):\n%s", m.step, op, d)
	}
}

// Check runs after every action: whatever the action was, every bookmark,
// the whole gap listing and every series' coverage must match the model,
// so a store that changed state it should not have is caught at once.
func (m *machine) Check(t *rapid.T) {
	for _, name := range smStreams {
		for _, mode := range smModes {
			m.checkLoad(t, checkpoint.Key{Stream: name, Mode: mode})
		}
	}
	got, err := m.s.ListGaps(m.ctx, checkpoint.GapQuery{})
	m.check(t, "ListGaps (all)", err, nil)
	m.same(t, "ListGaps (all)", m.open, got)
	for _, series := range smSeries {
		m.checkCoverage(t, series)
	}
	m.step++
}

// Advance moves the clock forward.
func (m *machine) Advance(t *rapid.T) {
	d := rapid.SampledFrom([]time.Duration{0, time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute}).Draw(t, "advance")
	m.clock.Advance(d)
}

// Acquire tries to lease a stream.
func (m *machine) Acquire(t *rapid.T) {
	name := rapid.SampledFrom(smStreams).Draw(t, "stream")
	owner := rapid.SampledFrom(smOwners).Draw(t, "owner")
	ttl := rapid.SampledFrom(smTTLs).Draw(t, "ttl")
	ms := m.stream(name)
	l, err := m.s.Acquire(m.ctx, name, owner, ttl)
	op := fmt.Sprintf("Acquire(%s, %s, %v)", name, owner, ttl)
	if ms.held() && m.clock.Now().Before(ms.lease.Expires) {
		m.check(t, op, err, checkpoint.ErrLeaseHeld)
		return
	}
	m.check(t, op, err, nil)
	if l.Token <= ms.lease.Token {
		t.Fatalf("step %d: %s: token %d, want > %d", m.step, op, l.Token, ms.lease.Token)
	}
	m.same(t, op, checkpoint.Lease{Stream: name, Owner: owner, Token: l.Token, Expires: m.clock.After(ttl)}, l)
	ms.lease, ms.released = l, false
	m.grants = append(m.grants, l)
}

// Renew renews a lease granted at some point.
func (m *machine) Renew(t *rapid.T) {
	if len(m.grants) == 0 {
		t.Skip("no lease granted yet")
	}
	l := rapid.SampledFrom(m.grants).Draw(t, "lease")
	ttl := rapid.SampledFrom(smTTLs).Draw(t, "ttl")
	ms := m.stream(l.Stream)
	got, err := m.s.Renew(m.ctx, l, ttl)
	op := fmt.Sprintf("Renew(%+v, %v)", l, ttl)
	if !ms.held() || ms.lease.Token != l.Token {
		m.check(t, op, err, checkpoint.ErrLeaseLost)
		return
	}
	m.check(t, op, err, nil)
	ms.lease.Expires = m.clock.After(ttl)
	m.same(t, op, ms.lease, got)
}

// Release releases a lease granted at some point.
func (m *machine) Release(t *rapid.T) {
	if len(m.grants) == 0 {
		t.Skip("no lease granted yet")
	}
	l := rapid.SampledFrom(m.grants).Draw(t, "lease")
	ms := m.stream(l.Stream)
	err := m.s.Release(m.ctx, l)
	op := fmt.Sprintf("Release(%+v)", l)
	if ms.lease.Token != l.Token {
		m.check(t, op, err, checkpoint.ErrLeaseLost)
		return
	}
	m.check(t, op, err, nil)
	ms.released = true
}

// Commit commits a cursor, fenced by some lease or unfenced, at the current
// version or a wrong one.
func (m *machine) Commit(t *rapid.T) {
	var l checkpoint.Lease
	name := rapid.SampledFrom(smStreams).Draw(t, "stream")
	if len(m.grants) > 0 && rapid.Bool().Draw(t, "fenced") {
		l = rapid.SampledFrom(m.grants).Draw(t, "lease")
		name = l.Stream
	}
	key := checkpoint.Key{Stream: name, Mode: rapid.SampledFrom(smModes).Draw(t, "mode")}
	ms := m.stream(name)
	expect := ms.cps[key.Mode].Version + rapid.SampledFrom([]int64{0, 0, 0, -1, 1}).Draw(t, "version skew")
	if expect < 0 {
		expect = 0
	}
	cursor := rapid.SliceOfN(rapid.Byte(), 0, 8).Draw(t, "cursor")
	got, err := m.s.Commit(m.ctx, key, cursor, expect, l)
	op := fmt.Sprintf("Commit(%v, %q, %d, token %d)", key, cursor, expect, l.Token)
	switch {
	case l.Token != 0 && (!ms.held() || ms.lease.Token != l.Token):
		m.check(t, op, err, checkpoint.ErrLeaseLost)
	case l.Token == 0 && ms.held():
		m.check(t, op, err, checkpoint.ErrLeaseHeld)
	case expect != ms.cps[key.Mode].Version:
		m.check(t, op, err, checkpoint.ErrConflict)
	default:
		m.check(t, op, err, nil)
		ms.cps[key.Mode] = checkpoint.Checkpoint{Key: key, Cursor: cursor, Version: expect + 1, UpdatedAt: m.clock.Now()}
		m.same(t, op, ms.cps[key.Mode], got)
	}
}

// Load loads a bookmark.
func (m *machine) Load(t *rapid.T) {
	key := checkpoint.Key{
		Stream: rapid.SampledFrom(smStreams).Draw(t, "stream"),
		Mode:   rapid.SampledFrom(smModes).Draw(t, "mode"),
	}
	m.checkLoad(t, key)
}

// checkLoad loads key and compares it with the model.
func (m *machine) checkLoad(t *rapid.T, key checkpoint.Key) {
	t.Helper()
	got, err := m.s.Load(m.ctx, key)
	m.check(t, "Load("+key.String()+")", err, nil)
	want := checkpoint.Checkpoint{Key: key}
	if ms := m.streams[key.Stream]; ms != nil && ms.cps[key.Mode].Version > 0 {
		want = ms.cps[key.Mode]
	}
	m.same(t, "Load("+key.String()+")", want, got)
}

// AddGap records a gap.
func (m *machine) AddGap(t *rapid.T) {
	in := checkpoint.Gap{
		Key: checkpoint.Key{
			Stream: rapid.SampledFrom(smStreams).Draw(t, "stream"),
			Mode:   rapid.SampledFrom(smModes).Draw(t, "mode"),
		},
		Cursor: rapid.SliceOfN(rapid.Byte(), 0, 4).Draw(t, "cursor"),
		Reason: rapid.SampledFrom(smReasons).Draw(t, "reason"),
	}
	if rapid.Bool().Draw(t, "has range") {
		a := rapid.IntRange(0, 50).Draw(t, "start")
		in.Range = span(a, a+rapid.IntRange(1, 10).Draw(t, "length"))
	}
	got, err := m.s.AddGap(m.ctx, in)
	m.check(t, "AddGap", err, nil)
	if n := len(m.issued); n > 0 && got.ID <= m.issued[n-1] {
		t.Fatalf("step %d: AddGap: ID %d, want > %d", m.step, got.ID, m.issued[n-1])
	}
	in.ID, in.Created = got.ID, m.clock.Now()
	m.same(t, "AddGap", in, got)
	m.open = append(m.open, in)
	m.issued = append(m.issued, in.ID)
}

// ResolveGap resolves an issued gap (open or not) or an unknown ID.
func (m *machine) ResolveGap(t *rapid.T) {
	if len(m.issued) == 0 || rapid.IntRange(0, 9).Draw(t, "unknown") == 0 {
		var last int64
		if n := len(m.issued); n > 0 {
			last = m.issued[n-1]
		}
		id := last + rapid.Int64Range(1000, 2000).Draw(t, "unknown id")
		m.check(t, fmt.Sprint("ResolveGap(unknown ", id, ")"), m.s.ResolveGap(m.ctx, id), checkpoint.ErrNotFound)
		return
	}
	id := rapid.SampledFrom(m.issued).Draw(t, "id")
	m.check(t, fmt.Sprint("ResolveGap(", id, ")"), m.s.ResolveGap(m.ctx, id), nil)
	m.open = slices.DeleteFunc(m.open, func(g checkpoint.Gap) bool { return g.ID == id })
}

// ListGaps drains a filtered listing page by page.
func (m *machine) ListGaps(t *rapid.T) {
	q := checkpoint.GapQuery{Limit: rapid.IntRange(0, 4).Draw(t, "limit")}
	if rapid.Bool().Draw(t, "by stream") {
		q.Stream = rapid.SampledFrom(smStreams).Draw(t, "stream")
	}
	if rapid.Bool().Draw(t, "by mode") {
		q.Mode = rapid.SampledFrom(smModes).Draw(t, "mode")
	}
	var want, got []checkpoint.Gap
	for _, g := range m.open {
		if (q.Stream == "" || g.Key.Stream == q.Stream) && (q.Mode == 0 || g.Key.Mode == q.Mode) {
			want = append(want, g)
		}
	}
	for pages := 0; pages <= len(want)+1; pages++ {
		page, err := m.s.ListGaps(m.ctx, q)
		m.check(t, fmt.Sprintf("ListGaps(%+v)", q), err, nil)
		if len(page) == 0 || q.Limit == 0 {
			got = append(got, page...)
			break
		}
		if len(page) > q.Limit {
			t.Fatalf("step %d: ListGaps(%+v): %d gaps, over the limit", m.step, q, len(page))
		}
		got = append(got, page...)
		q.After = page[len(page)-1].ID
	}
	m.same(t, "ListGaps drained", want, got)
}

// AddCoverage adds a range on a one-minute grid; the model is the set of
// covered minutes.
func (m *machine) AddCoverage(t *rapid.T) {
	series := rapid.SampledFrom(smSeries).Draw(t, "series")
	a := rapid.IntRange(0, 40).Draw(t, "start")
	b := a + rapid.IntRange(1, 10).Draw(t, "length")
	m.check(t, fmt.Sprintf("AddCoverage(%s, %v)", series, span(a, b)), m.s.AddCoverage(m.ctx, series, span(a, b)), nil)
	if m.cover[series] == nil {
		m.cover[series] = map[int]bool{}
	}
	for i := a; i < b; i++ {
		m.cover[series][i] = true
	}
}

// Coverage reads a series' coverage back: the maximal runs of covered
// minutes, which are sorted, disjoint and never touch.
func (m *machine) Coverage(t *rapid.T) {
	m.checkCoverage(t, rapid.SampledFrom(smSeries).Draw(t, "series"))
}

// checkCoverage reads series' coverage and compares it with the model.
func (m *machine) checkCoverage(t *rapid.T, series string) {
	t.Helper()
	got, err := m.s.Coverage(m.ctx, series)
	m.check(t, "Coverage", err, nil)
	var want []checkpoint.Range
	for i := 0; i <= 51; i++ {
		if !m.cover[series][i] {
			continue
		}
		j := i
		for m.cover[series][j] {
			j++
		}
		want = append(want, span(i, j))
		i = j
	}
	m.same(t, "Coverage("+series+")", want, got.Ranges())
}
