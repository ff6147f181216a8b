package slice_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
	"pgregory.net/rapid"
)

// stamped is a record of a feed queried by time.
type stamped struct {
	At  time.Time
	Key string
}

// timeAPI answers "records since T, oldest first, at most limit", each run
// of records that share a time in an order of its own at each request,
// and never more than max when set (a provider that caps the limit it is
// asked for, silently).
type timeAPI struct {
	recs []stamped
	rng  *rand.Rand
	max  int
	// blind, if set, answers the feed from its start whatever Since asks:
	// a fetch that forgot to send it.
	blind bool
}

func (a *timeAPI) fetch(_ context.Context, q slice.TimeQuery) ([]stamped, forage.Outcome) {
	var out []stamped
	for _, r := range a.recs {
		if a.blind || !r.At.Before(q.Since) {
			out = append(out, r)
		}
	}
	slices.SortStableFunc(out, func(x, y stamped) int { return x.At.Compare(y.At) })
	for i := 0; i < len(out); { // shuffle each run of records that share a time
		j := i
		for j < len(out) && out[j].At.Equal(out[i].At) {
			j++
		}
		a.rng.Shuffle(j-i, func(x, y int) { out[i+x], out[i+y] = out[i+y], out[i+x] })
		i = j
	}
	n := min(len(out), q.Limit)
	if a.max > 0 {
		n = min(n, a.max)
	}
	return out[:n], forage.Outcome{Status: 200}
}

// TestPropertyATimeFeedDeliversEachRecordOnce: a feed queried by time,
// whose records share times in runs shorter than its page (returned in
// any order within a run), growing between runs: every record is
// delivered exactly once, whatever the page size, the runs and the
// growth, and a run with nothing new writes nothing. Asking "after the
// last time" skipped the rest of a run a page cut; asking "since" it
// delivered the run again.
func TestPropertyATimeFeedDeliversEachRecordOnce(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		limit := rapid.IntRange(2, 6).Draw(rt, "limit")
		batches := rapid.SliceOfN(rapid.SliceOfN(rapid.IntRange(1, limit-1), 0, 5), 1, 5).Draw(rt, "runs of equal times added before each run")
		seed := rapid.Uint64().Draw(rt, "seed")
		var fail string
		synctest.Test(t, func(t *testing.T) {
			api := &timeAPI{rng: rand.New(rand.NewPCG(seed, 1))}
			got := map[string]int{}
			feed, err := slice.TimeFeed(slice.TimeFeedConfig[stamped]{Fetch: api.fetch, Limit: limit, Settle: slice.NoSettle,
				Time: func(r stamped) time.Time { return r.At }, Key: func(r stamped) string { return r.Key }})
			if err != nil {
				fail = err.Error()
				return
			}
			runner, err := feedRunner(nil, checkpoint.SteadyState, feed, func(r stamped) { got[r.Key]++ })
			if err != nil {
				fail = err.Error()
				return
			}
			at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			for i, runs := range batches {
				at = api.add(at, runs)
				rep, err := runner.Run(context.Background(), nil)
				if err != nil || rep.Reason != "" {
					fail = fmt.Sprintf("run %d: %v, reason %q", i, err, rep.Reason)
					return
				}
				if len(runs) == 0 && rep.Records != 0 {
					fail = fmt.Sprintf("run %d with nothing new delivered %d records", i, rep.Records)
					return
				}
				for _, r := range api.recs {
					if got[r.Key] != 1 {
						fail = fmt.Sprintf("run %d: %s (at %v) delivered %d times, want once", i, r.Key, r.At.Format(time.TimeOnly), got[r.Key])
						return
					}
				}
			}
		})
		if fail != "" {
			rt.Fatal(fail)
		}
	})
}

// TestATimeFeedStopsWhereItCannotPage: a full page whose records all
// share one time cannot be paged past; the run stops permanent, naming
// it, rather than loop or skip. A page out of time order is refused too,
// and so is a Config without what it needs, by field.
func TestATimeFeedStopsWhereItCannotPage(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := slice.TimeFeedConfig[stamped]{Limit: 3, Time: func(r stamped) time.Time { return r.At }, Key: func(r stamped) string { return r.Key }}
	for name, page := range map[string][]stamped{
		"a full page at one time": {{at, "a"}, {at, "b"}, {at, "c"}},
		"out of time order":       {{at.Add(time.Second), "a"}, {at, "b"}},
	} {
		cfg.Fetch = func(context.Context, slice.TimeQuery) ([]stamped, forage.Outcome) {
			return page, forage.Outcome{Status: 200}
		}
		feed, err := slice.TimeFeed(cfg)
		if err != nil {
			t.Fatal(err)
		}
		p, out := feed.Fetch(context.Background(), slice.Slice{})
		if out.Class() != forage.Permanent || !errors.Is(out.Err, slice.ErrInvalidPage) || len(p.Records) != 0 {
			t.Errorf("%s: %v (%v), %d records; want a permanent invalid page", name, out.Class(), out.Err, len(p.Records))
		}
	}
	for field, c := range map[string]slice.TimeFeedConfig[stamped]{
		"Fetch":  {Limit: 3, Time: cfg.Time, Key: cfg.Key},
		"Limit":  {Fetch: cfg.Fetch, Time: cfg.Time, Key: cfg.Key},
		"Key":    {Fetch: cfg.Fetch, Limit: 3, Time: cfg.Time},
		"Settle": {Fetch: cfg.Fetch, Limit: 3, Time: cfg.Time, Key: cfg.Key, Settle: -time.Second},
	} {
		if _, err := slice.TimeFeed(c); !errors.Is(err, slice.ErrInvalidConfig) || !containsField(err, "TimeFeedConfig."+field) {
			t.Errorf("a config without a good %s: %v; want ErrInvalidConfig naming it", field, err)
		}
	}
}

func containsField(err error, field string) bool {
	return err != nil && strings.Contains(err.Error(), field)
}

// TestPropertyATimeFeedWaitsForALaggingIndex: a provider whose index shows
// a record up to lag after its time (so a record may appear under a time a
// run has passed): with Settle at lag, every record is delivered exactly
// once, records sharing a second too; a run leaves what is newer than
// now − Settle to a later one.
func TestPropertyATimeFeedWaitsForALaggingIndex(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		const lag = 10 * time.Second
		limit := rapid.IntRange(2, 6).Draw(rt, "limit")
		steps := rapid.SliceOfN(rapid.IntRange(0, 4), 2, 8).Draw(rt, "records indexed before each run")
		seed := rapid.Uint64().Draw(rt, "seed")
		ties := rapid.Bool().Draw(rt, "times to the second")
		var fail string
		synctest.Test(t, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 2))
			api := &timeAPI{rng: rng}
			got := map[string]int{}
			feed, _ := slice.TimeFeed(slice.TimeFeedConfig[stamped]{Fetch: api.fetch, Limit: limit, Settle: lag,
				Time: func(r stamped) time.Time { return r.At }, Key: func(r stamped) string { return r.Key }})
			prov, _ := budget.NewLocal("api", budget.Config{Adaptive: aimd.Config{Initial: 1000, Max: 1000}})
			runner, _ := slice.New(slice.Config[stamped]{Stream: "s", Mode: checkpoint.SteadyState, Store: checkpoint.NewMemoryStore(checkpoint.Config{}),
				Provider: prov, Source: feed, Sink: slice.SinkFunc[stamped](func(_ context.Context, p slice.Page[stamped]) error {
					for _, r := range p.Records {
						got[r.Key]++
					}
					return nil
				})})
			for i, n := range append(steps, 0, 0, 0, 0, 0) { // runs at the end with nothing new, until all settled
				for range n { // indexed now, under a time up to lag ago
					at := time.Now().Add(-time.Duration(rng.Int64N(int64(lag))))
					if ties {
						at = at.Truncate(time.Second) // records share seconds
					}
					api.recs = append(api.recs, stamped{At: at, Key: fmt.Sprintf("r%d", len(api.recs))})
				}
				if _, err := runner.Run(context.Background(), nil); err != nil {
					if ties && maxTies(api.recs) >= limit {
						return // more share a second than a page holds: the stop is right
					}
					fail = fmt.Sprintf("run %d: %v", i, err)
					return
				}
				for _, r := range api.recs {
					if got[r.Key] > 1 || got[r.Key] == 0 && !r.At.After(time.Now().Add(-lag)) {
						fail = fmt.Sprintf("run %d: %s (at %v, now %v) delivered %d times", i, r.Key, r.At.Format(time.TimeOnly), time.Now().Format(time.TimeOnly), got[r.Key])
						return
					}
				}
				time.Sleep(lag / 4) // less than the lag: a record may appear under a time a run has passed
			}
			for _, r := range api.recs {
				if got[r.Key] != 1 {
					fail = fmt.Sprintf("at the end: %s delivered %d times, want once", r.Key, got[r.Key])
					return
				}
			}
		})
		if fail != "" {
			rt.Fatal(fail)
		}
	})
}

// maxTies returns the most records of recs that share one time.
// add appends, for each count in runs, that many records a second after
// the last time (at, then each added second), keyed by their place, and
// returns the last time.
func (a *timeAPI) add(at time.Time, runs []int) time.Time {
	for _, n := range runs {
		at = at.Add(time.Second)
		for range n {
			a.recs = append(a.recs, stamped{At: at, Key: fmt.Sprintf("r%d", len(a.recs))})
		}
	}
	return at
}

func maxTies(recs []stamped) int {
	n := map[time.Time]int{}
	most := 0
	for _, r := range recs {
		n[r.At]++
		most = max(most, n[r.At])
	}
	return most
}

// TestATimeFeedKeepsItsCursorTrue: what a second review found. A slow
// answer is read against the horizon taken before the request (taken
// after it, a record the index had not shown yet was passed for good); a
// time in a zone whose offset has seconds is kept in UTC (RFC 3339 wrote
// it 32 s late, past two records); a key that is not UTF-8 is not
// delivered again at every run; a cursor TimeFeed did not write is
// refused, not read as the start; a Limit of 1 is refused.
func TestATimeFeedKeepsItsCursorTrue(t *testing.T) {
	t.Parallel()
	cfg := func(fetch func(context.Context, slice.TimeQuery) ([]stamped, forage.Outcome), settle time.Duration) slice.FetchFunc[stamped] {
		f, err := slice.TimeFeed(slice.TimeFeedConfig[stamped]{Fetch: fetch, Limit: 5, Settle: settle,
			Time: func(r stamped) time.Time { return r.At }, Key: func(r stamped) string { return r.Key }})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	t.Run("a slow answer", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			t0 := time.Now()
			a := stamped{t0, "a"} // indexed at +10s
			c := stamped{t0.Add(time.Second), "c"}
			time.Sleep(5 * time.Second) // the request at +5s sees c, not a yet
			feed := cfg(func(context.Context, slice.TimeQuery) ([]stamped, forage.Outcome) {
				time.Sleep(6 * time.Second) // answered at +11s
				return []stamped{c}, forage.Outcome{Status: 200}
			}, 10*time.Second)
			p, _ := feed.Fetch(context.Background(), slice.Slice{})
			if len(p.Records) != 0 {
				t.Fatalf("delivered %v, passing %v the index had not shown when asked", p.Records, a)
			}
		})
	})
	t.Run("a zone offset with seconds", func(t *testing.T) {
		lmt := time.FixedZone("LMT", 19*60+32)
		at := time.Date(1890, 1, 1, 0, 0, 0, 0, lmt)
		page := []stamped{{at, "a"}, {at.Add(10 * time.Second), "b"}}
		feed := cfg(func(_ context.Context, q slice.TimeQuery) ([]stamped, forage.Outcome) {
			var out []stamped
			for _, r := range page {
				if !r.At.Before(q.Since) {
					out = append(out, r)
				}
			}
			return out, forage.Outcome{Status: 200}
		}, slice.NoSettle)
		// upToDate fetches after cursor until the feed says it is caught up
		// (a page as long as any the provider answered may be cut: the
		// page after it is asked).
		upToDate := func(cursor []byte) ([]byte, []stamped, error) {
			var got []stamped
			for range 5 {
				p, out := feed.Fetch(context.Background(), slice.Slice{After: cursor})
				if out.Err != nil {
					return cursor, got, out.Err
				}
				got, cursor = append(got, p.Records...), p.Next
				if p.Last {
					break
				}
			}
			return cursor, got, nil
		}
		cursor, _, _ := upToDate(nil)
		page = append(page, stamped{at.Add(20 * time.Second), "c"})
		_, got, err := upToDate(cursor)
		if err != nil || len(got) != 1 || got[0].Key != "c" {
			t.Fatalf("after a, b: delivered %v (%v), want c", got, err)
		}
	})
	t.Run("a key that is not UTF-8", func(t *testing.T) {
		page := []stamped{{time.Unix(100, 0), "\xff\xfe"}}
		feed := cfg(func(context.Context, slice.TimeQuery) ([]stamped, forage.Outcome) {
			return page, forage.Outcome{Status: 200}
		}, slice.NoSettle)
		p, _ := feed.Fetch(context.Background(), slice.Slice{})
		p2, _ := feed.Fetch(context.Background(), slice.Slice{After: p.Next})
		if len(p2.Records) != 0 || string(p2.Next) != string(p.Next) {
			t.Fatalf("nothing changed, yet delivered %d records again, cursor %s -> %s", len(p2.Records), p.Next, p2.Next)
		}
	})
	t.Run("a cursor it did not write", func(t *testing.T) {
		feed := cfg(func(context.Context, slice.TimeQuery) ([]stamped, forage.Outcome) {
			t.Fatal("asked the provider with a cursor it did not write")
			return nil, forage.Outcome{}
		}, slice.NoSettle)
		for _, cursor := range []string{`null`, `{}`, `{"page":3}`, `{"tf":1,"n":3,"h":7}`, `{"t":"2026-01-01T00:00:00Z"}`} {
			if _, out := feed.Fetch(context.Background(), slice.Slice{After: []byte(cursor)}); out.Class() != forage.Permanent {
				t.Errorf("cursor %s: %v (%v), want Permanent", cursor, out.Class(), out.Err)
			}
		}
	})
	t.Run("Limit 1", func(t *testing.T) {
		if _, err := slice.TimeFeed(slice.TimeFeedConfig[stamped]{Fetch: func(context.Context, slice.TimeQuery) ([]stamped, forage.Outcome) { return nil, forage.Outcome{} },
			Limit: 1, Time: func(r stamped) time.Time { return r.At }, Key: func(r stamped) string { return r.Key }}); !errors.Is(err, slice.ErrInvalidConfig) {
			t.Errorf("Limit 1: %v, want ErrInvalidConfig", err)
		}
	})
}

// TestATimeFeedSettlesByDefault: with Settle left zero, a record the
// provider's index shows 2.5 s after its time is not passed: the newest
// minute waits for a later run (DefaultSettle). Zero trusted the index,
// and such records were lost for good, every run said caught up (27 of
// 1,557 in a review's run). NoSettle still trusts it.
func TestATimeFeedSettlesByDefault(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		settle time.Duration
		want   int // records delivered in the end
	}{{"zero", 0, 2}, {"NoSettle", slice.NoSettle, 1}} {
		synctest.Test(t, func(t *testing.T) {
			t0 := time.Now()
			api := &timeAPI{rng: rand.New(rand.NewPCG(1, 1)), recs: []stamped{{t0.Add(-time.Second), "a"}}}
			feed, err := slice.TimeFeed(slice.TimeFeedConfig[stamped]{Fetch: api.fetch, Limit: 5, Settle: tc.settle,
				Time: func(r stamped) time.Time { return r.At }, Key: func(r stamped) string { return r.Key }})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int{}
			prov, _ := budget.NewLocal("api", budget.Config{Adaptive: aimd.Config{Initial: 1000, Max: 1000}})
			runner, _ := slice.New(slice.Config[stamped]{Stream: "s", Mode: checkpoint.SteadyState, Store: checkpoint.NewMemoryStore(checkpoint.Config{}),
				Provider: prov, Source: feed, Sink: slice.SinkFunc[stamped](func(_ context.Context, p slice.Page[stamped]) error {
					for _, r := range p.Records {
						got[r.Key]++
					}
					return nil
				})})
			if _, err := runner.Run(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2500 * time.Millisecond)
			api.recs = append(api.recs, stamped{t0.Add(-2 * time.Second), "b"}) // indexed late, under an earlier time
			time.Sleep(2 * time.Minute)
			if _, err := runner.Run(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.want || got["a"] != 1 || got["b"] > 1 {
				t.Errorf("Settle %s: delivered %v; want %d records, each once", tc.name, got, tc.want)
			}
		})
	}
}
