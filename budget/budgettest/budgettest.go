// Package budgettest is the contract of [budget.RecordStore] and of
// [budget.ShareStore] as test suites. Every implementation runs them: the
// memory and file stores of package checkpoint (records), [NewShareStore]
// (shares), and the PostgreSQL store in the pgstore module (both). The
// share store kept in memory that [NewShareStore] returns also serves
// tests that simulate several processes in one.
//
// The record store's suite, as the memory store runs it:
//
//	func TestRecordStore(t *testing.T) {
//		budgettest.RunRecordStore(t, func(t *testing.T) budget.RecordStore {
//			return checkpoint.NewMemoryStore(checkpoint.Config{})
//		})
//	}
package budgettest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"pgregory.net/rapid"
)

// RunRecordStore runs the contract of [budget.RecordStore] against the
// stores newStore returns: any record round-trips; a save is an idempotent
// upsert whose pause only grows and which keeps an operator's status when
// it sets none, checked step by step against a model; keys are
// independent; concurrent saves of one key keep the latest pause; a ctx
// that has ended and an invalid key or record are errors that change
// nothing; a store that is also a [budget.RecordLister] lists exactly its
// records, in byte order of the keys, in pages of any size. newStore is called once per subtest, with the subtest's t, and
// subtests run in parallel: each store returned must share no state with
// the others (a PostgreSQL store uses a fresh schema). Register cleanup
// with t.Cleanup; report setup failures with t.Fatal.
//
// Records are drawn with times in UTC to the microsecond (PostgreSQL's
// precision), rates finite and >= 0, and names valid.
func RunRecordStore(t *testing.T, newStore func(t *testing.T) budget.RecordStore) {
	t.Helper()
	for _, tc := range []struct {
		name string
		test func(*testing.T, budget.RecordStore)
	}{
		{"RoundTrip", testRoundTrip},
		{"Model", testModel},
		{"Merge", testMerge},
		{"Concurrent", testConcurrent},
		{"Canceled", testCanceled},
		{"Invalid", testInvalid},
		{"List", testList},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.test(t, newStore(t))
		})
	}
}

// epoch is the base of every time the suite draws.
var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// drawTime draws a time near epoch (minutes apart, so equal ends are
// common, with now and then a microsecond more), or the zero Time.
func drawTime(t *rapid.T, label string) time.Time {
	if rapid.IntRange(0, 4).Draw(t, label+"Zero") == 0 {
		return time.Time{}
	}
	m := time.Duration(rapid.IntRange(-3, 12).Draw(t, label+"Minutes")) * time.Minute
	us := time.Duration(rapid.SampledFrom([]int{0, 0, 0, 1, 999999}).Draw(t, label+"Micros")) * time.Microsecond
	return epoch.Add(m + us)
}

// drawRecord draws any valid record for key.
func drawRecord(t *rapid.T, key string) forage.ProviderRecord {
	rate := rapid.OneOf(rapid.Just(0.0), rapid.Float64Range(0, 1e6))
	return forage.ProviderRecord{
		Key:         key,
		Status:      rapid.SampledFrom([]string{"", "", "active", "paused"}).Draw(t, "status"),
		Why:         rapid.SampledFrom([]string{"", "key revoked", "maintenance: ünïcode, spaces & symbols"}).Draw(t, "why"),
		Rate:        rate.Draw(t, "rate"),
		Ceiling:     rate.Draw(t, "ceiling"),
		Confirmed:   rapid.Bool().Draw(t, "confirmed"),
		PausedUntil: drawTime(t, "pausedUntil"),
		PauseReason: forage.Reason(rapid.SampledFrom([]string{"", "throttled", "banned"}).Draw(t, "pauseReason")),
		Requests:    rapid.Int64().Draw(t, "requests"),
		OK:          rapid.Int64().Draw(t, "ok"),
		Throttled:   rapid.Int64().Draw(t, "throttled"),
		Updated:     drawTime(t, "updated"),
		Refusals:    drawRefusals(t),
		Spent:       drawSpent(t),
	}
}

// drawSpent draws up to three known limits' accounted times (none zero),
// or none.
func drawSpent(t *rapid.T) map[string]time.Time {
	var m map[string]time.Time
	for i := range rapid.IntRange(0, 3).Draw(t, "spent") {
		if at := drawTime(t, fmt.Sprint("spent", i)); !at.IsZero() {
			if m == nil {
				m = map[string]time.Time{}
			}
			m[rapid.SampledFrom([]string{"3/1h0m0s", "1200/1m0s/weighted/weight", "10/1s/ünïcode key"}).Draw(t, fmt.Sprint("spentKey", i))] = at
		}
	}
	return m
}

// drawRefusals draws up to eight refusal times (none zero), or none.
func drawRefusals(t *rapid.T) []time.Time {
	var ts []time.Time
	for i := range rapid.IntRange(0, 8).Draw(t, "refusals") {
		if at := drawTime(t, fmt.Sprint("refusal", i)); !at.IsZero() {
			ts = append(ts, at)
		}
	}
	return ts
}

// merge is the model of SaveRecord: saved upserted with r.
func merge(saved forage.ProviderRecord, had bool, r forage.ProviderRecord) forage.ProviderRecord {
	if !had {
		return r
	}
	out := r
	if r.PausedUntil.Before(saved.PausedUntil) {
		out.PausedUntil, out.PauseReason = saved.PausedUntil, saved.PauseReason
	}
	if r.Status == "" {
		out.Status, out.Why = saved.Status, saved.Why
	}
	return out
}

// diff describes how got differs from want, or returns "" if it does not.
func diff(got, want forage.ProviderRecord) string {
	var d []string
	add := func(field string, ok bool, g, w any) {
		if !ok {
			d = append(d, fmt.Sprintf("%s = %v, want %v", field, g, w))
		}
	}
	add("Key", got.Key == want.Key, got.Key, want.Key)
	add("Status", got.Status == want.Status, got.Status, want.Status)
	add("Why", got.Why == want.Why, got.Why, want.Why)
	add("Rate", got.Rate == want.Rate, got.Rate, want.Rate)
	add("Ceiling", got.Ceiling == want.Ceiling, got.Ceiling, want.Ceiling)
	add("Confirmed", got.Confirmed == want.Confirmed, got.Confirmed, want.Confirmed)
	add("PausedUntil", got.PausedUntil.Equal(want.PausedUntil), got.PausedUntil, want.PausedUntil)
	add("PauseReason", got.PauseReason == want.PauseReason, got.PauseReason, want.PauseReason)
	add("Requests", got.Requests == want.Requests, got.Requests, want.Requests)
	add("OK", got.OK == want.OK, got.OK, want.OK)
	add("Throttled", got.Throttled == want.Throttled, got.Throttled, want.Throttled)
	add("Updated", got.Updated.Equal(want.Updated), got.Updated, want.Updated)
	add("Refusals", slices.EqualFunc(got.Refusals, want.Refusals, time.Time.Equal), got.Refusals, want.Refusals)
	add("Spent", maps.EqualFunc(got.Spent, want.Spent, time.Time.Equal), got.Spent, want.Spent)
	return strings.Join(d, "; ")
}

// check loads key and fails unless it holds want (had: any record at all).
func check(t rapid.TB, s budget.RecordStore, step string, key string, want forage.ProviderRecord, had bool) {
	t.Helper()
	got, ok, err := s.LoadRecord(context.Background(), key)
	switch {
	case err != nil:
		t.Fatalf("%s: LoadRecord(%q): %v", step, key, err)
	case ok != had:
		t.Fatalf("%s: LoadRecord(%q) found = %v, want %v (record %+v)", step, key, ok, had, got)
	case !had && diff(got, forage.ProviderRecord{}) != "":
		t.Fatalf("%s: LoadRecord(%q) of no record = %+v, want the zero record", step, key, got)
	case had:
		if d := diff(got, want); d != "" {
			t.Fatalf("%s: LoadRecord(%q): %s", step, key, d)
		}
	}
}

// save saves r and fails on an error.
func save(t rapid.TB, s budget.RecordStore, step string, r forage.ProviderRecord) {
	t.Helper()
	if err := s.SaveRecord(context.Background(), r); err != nil {
		t.Fatalf("%s: SaveRecord(%+v): %v", step, r, err)
	}
}

// testRoundTrip: any record saved under a new key loads as saved, and saving
// it again changes nothing.
func testRoundTrip(t *testing.T, s budget.RecordStore) {
	n := 0
	rapid.Check(t, func(t *rapid.T) {
		n++
		name := rapid.SampledFrom([]string{"api.example.com", "ünïcode host", "a/b:c", strings.Repeat("k", 1000)}).Draw(t, "key")
		key := fmt.Sprintf("roundtrip-%d-%s", n, name)
		r := drawRecord(t, key)
		check(t, s, "before", key, forage.ProviderRecord{}, false)
		save(t, s, "first save", r)
		check(t, s, "after the first save", key, r, true)
		save(t, s, "second save", r)
		check(t, s, "after the same save again", key, r, true)
	})
}

// testModel: any sequence of saves to a few keys leaves every key holding
// what the model holds: the upsert merges as the contract says, is
// idempotent, and never touches another key.
func testModel(t *testing.T, s budget.RecordStore) {
	n := 0
	rapid.Check(t, func(t *rapid.T) {
		n++
		keys := []string{fmt.Sprintf("model-%d-a", n), fmt.Sprintf("model-%d-b", n), fmt.Sprintf("model-%d-ü", n)}
		model := map[string]forage.ProviderRecord{}
		steps := rapid.IntRange(1, 20).Draw(t, "steps")
		for i := range steps {
			key := rapid.SampledFrom(keys).Draw(t, "key")
			r := drawRecord(t, key)
			saved, had := model[key]
			save(t, s, fmt.Sprintf("step %d", i), r)
			model[key] = merge(saved, had, r)
			if rapid.Bool().Draw(t, "again") {
				save(t, s, fmt.Sprintf("step %d (again)", i), r)
			}
			for _, k := range keys {
				want, had := model[k]
				check(t, s, fmt.Sprintf("step %d", i), k, want, had)
			}
		}
	})
}

// testMerge pins the two merged fields by example: a shorter pause does not
// shorten the saved one (nor change its reason), an equal end takes the new
// reason, and a save that sets no Status keeps the operator's.
func testMerge(t *testing.T, s budget.RecordStore) {
	const key = "merge.example.com"
	until := epoch.Add(2 * time.Minute)
	operator := forage.ProviderRecord{Key: key, Status: "paused", Why: "key revoked"}
	save(t, s, "operator", operator)
	learned := forage.ProviderRecord{Key: key, Rate: 12.5, Ceiling: 20, Confirmed: true,
		PausedUntil: until, PauseReason: forage.ReasonThrottled, Requests: 7, OK: 5, Throttled: 2, Updated: epoch}
	save(t, s, "provider", learned)
	want := learned
	want.Status, want.Why = "paused", "key revoked"
	check(t, s, "a save without a status", key, want, true)

	shorter := learned
	shorter.PausedUntil, shorter.PauseReason, shorter.Rate = until.Add(-time.Minute), forage.ReasonBanned, 3
	save(t, s, "shorter pause", shorter)
	want.Rate = 3
	check(t, s, "a shorter pause", key, want, true)

	equal := learned
	equal.PauseReason = forage.ReasonBanned
	save(t, s, "equal end", equal)
	want.Rate, want.PauseReason = learned.Rate, forage.ReasonBanned
	check(t, s, "an equal end", key, want, true)

	none := forage.ProviderRecord{Key: key, Status: "active"}
	save(t, s, "resume", none)
	want = forage.ProviderRecord{Key: key, Status: "active", PausedUntil: until, PauseReason: forage.ReasonBanned}
	check(t, s, "an operator's resume with no pause", key, want, true)
}

// testConcurrent: saves of one key from many goroutines, each with its own
// pause end, leave the latest end; saves of other keys at the same time
// each land whole.
func testConcurrent(t *testing.T, s budget.RecordStore) {
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		wg.Go(func() {
			errs <- s.SaveRecord(context.Background(), forage.ProviderRecord{
				Key: "shared.example.com", PausedUntil: epoch.Add(time.Duration(i) * time.Second), PauseReason: forage.ReasonThrottled})
		})
		wg.Go(func() {
			errs <- s.SaveRecord(context.Background(), forage.ProviderRecord{Key: fmt.Sprintf("own-%d", i), Rate: float64(i), Requests: int64(i)})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent SaveRecord: %v", err)
		}
	}
	last := epoch.Add((n - 1) * time.Second)
	got, ok, err := s.LoadRecord(context.Background(), "shared.example.com")
	if err != nil || !ok || !got.PausedUntil.Equal(last) {
		t.Fatalf("after %d concurrent saves: LoadRecord = %+v, %v, %v; want the pause until %v", n, got, ok, err, last)
	}
	for i := range n {
		check(t, s, "concurrent", fmt.Sprintf("own-%d", i), forage.ProviderRecord{Key: fmt.Sprintf("own-%d", i), Rate: float64(i), Requests: int64(i)}, true)
	}
}

// testCanceled: with a ctx that has ended, LoadRecord and SaveRecord return
// an error wrapping the ctx's, and the save changes nothing.
func testCanceled(t *testing.T, s budget.RecordStore) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	const key = "canceled.example.com"
	before := forage.ProviderRecord{Key: key, Rate: 2}
	save(t, s, "setup", before)
	if err := s.SaveRecord(ctx, forage.ProviderRecord{Key: key, Rate: 9, PausedUntil: epoch}); !isCanceled(err) {
		t.Fatalf("SaveRecord with a cancelled ctx = %v, want an error wrapping context.Canceled", err)
	}
	if err := s.SaveRecord(ctx, forage.ProviderRecord{Key: "canceled-new"}); !isCanceled(err) {
		t.Fatalf("SaveRecord of a new key with a cancelled ctx = %v, want an error wrapping context.Canceled", err)
	}
	if _, _, err := s.LoadRecord(ctx, key); !isCanceled(err) {
		t.Fatalf("LoadRecord with a cancelled ctx = %v, want an error wrapping context.Canceled", err)
	}
	check(t, s, "after cancelled saves", key, before, true)
	check(t, s, "after cancelled saves", "canceled-new", forage.ProviderRecord{}, false)
}

// testInvalid: a key that is not a valid name is an error for both
// methods, and so is a save with an invalid status, why, reason or rate;
// none changes anything.
func testInvalid(t *testing.T, s budget.RecordStore) {
	ctx := context.Background()
	for _, key := range []string{"", "bad\xff", "new\nline", "bidi\u202ekey", strings.Repeat("x", 1025)} {
		if _, _, err := s.LoadRecord(ctx, key); err == nil {
			t.Errorf("LoadRecord(%.20q) = nil error, want one", key)
		}
		if err := s.SaveRecord(ctx, forage.ProviderRecord{Key: key, Rate: 1}); err == nil {
			t.Errorf("SaveRecord with key %.20q = nil error, want one", key)
		}
	}
	const key = "invalid.example.com"
	before := forage.ProviderRecord{Key: key, Rate: 2, Status: "active"}
	save(t, s, "setup", before)
	for name, r := range map[string]forage.ProviderRecord{
		"status":        {Key: key, Status: "bad\nstatus"},
		"why":           {Key: key, Status: "paused", Why: "forged\x1b[2Jlog"},
		"pause reason":  {Key: key, PausedUntil: epoch, PauseReason: "bad\xff"},
		"NaN rate":      {Key: key, Rate: math.NaN()},
		"negative rate": {Key: key, Rate: -1},
		"infinite rate": {Key: key, Rate: math.Inf(1)},
		"NaN ceiling":   {Key: key, Ceiling: math.NaN()},
		"negative ceil": {Key: key, Ceiling: -0.5},
	} {
		if err := s.SaveRecord(ctx, r); err == nil {
			t.Errorf("SaveRecord with an invalid %s = nil error, want one", name)
		}
	}
	check(t, s, "after invalid saves", key, before, true)
}

// testList: a store that is also a [budget.RecordLister] lists, page by
// page of any size, exactly the records it holds, each as LoadRecord
// returns it, in byte order of the keys (a key whose bytes sort apart
// from its letters' order included); a limit < 1 and an ended ctx are
// errors. A store that cannot list skips it.
func testList(t *testing.T, s budget.RecordStore) {
	l, ok := s.(budget.RecordLister)
	if !ok {
		t.Skip("the store is not a budget.RecordLister")
	}
	ctx := context.Background()
	if _, err := l.ListRecords(ctx, "", 0); err == nil {
		t.Error("ListRecords with limit 0 = nil error, want one")
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.ListRecords(canceled, "", 10); !isCanceled(err) {
		t.Errorf("ListRecords with a cancelled ctx = %v, want an error wrapping context.Canceled", err)
	}
	n := 0
	rapid.Check(t, func(t *rapid.T) {
		n++
		prefix := fmt.Sprintf("list-%d-", n) // every key of this check sorts after prefix, and before the next check's
		names := []string{"a", "a b", "a/b", "ab", "Z", "z", "ü", "é", "~", "A.b"}
		model := map[string]forage.ProviderRecord{}
		for i := range rapid.IntRange(0, 12).Draw(t, "saves") {
			key := prefix + rapid.SampledFrom(names).Draw(t, "key")
			r := drawRecord(t, key)
			saved, had := model[key]
			save(t, s, fmt.Sprintf("save %d", i), r)
			model[key] = merge(saved, had, r)
		}
		var got []forage.ProviderRecord
		after := prefix
		for page := 0; ; page++ {
			limit := rapid.IntRange(1, 4).Draw(t, "limit")
			recs, err := l.ListRecords(ctx, after, limit)
			if err != nil {
				t.Fatalf("ListRecords(%q, %d): %v", after, limit, err)
			}
			if len(recs) > limit {
				t.Fatalf("ListRecords(%q, %d) returned %d records", after, limit, len(recs))
			}
			done := len(recs) < limit
			for _, r := range recs {
				if r.Key <= after {
					t.Fatalf("ListRecords(%q, %d) returned key %q, not after the last one", after, limit, r.Key)
				}
				after = r.Key
				if !strings.HasPrefix(r.Key, prefix) {
					done = true // the next check's keys, or another test's
					break
				}
				got = append(got, r)
			}
			if done || page > 20 {
				break
			}
		}
		keys := slices.Sorted(maps.Keys(model))
		if len(got) != len(keys) {
			var listed []string
			for _, r := range got {
				listed = append(listed, r.Key)
			}
			t.Fatalf("listed keys %q, want %q", listed, keys)
		}
		for i, key := range keys {
			if got[i].Key != key {
				t.Fatalf("listed key %d = %q, want %q", i, got[i].Key, key)
			}
			if d := diff(got[i], model[key]); d != "" {
				t.Fatalf("listed record %q: %s", key, d)
			}
		}
	})
}

// isCanceled reports whether err wraps context.Canceled.
func isCanceled(err error) bool { return errors.Is(err, context.Canceled) }
