package slice

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/forage-go/forage"
)

// TimeQuery is one request of a feed queried by time: the records whose
// time is at or after Since (ties included: the provider's ">=", or its
// "since"), oldest first, at most Limit of them.
type TimeQuery struct {
	Since time.Time
	Limit int
}

// TimeFeedConfig configures [TimeFeed].
type TimeFeedConfig[R any] struct {
	// Fetch asks the provider for q and returns its records, oldest first,
	// with the outcome. Required.
	Fetch func(ctx context.Context, q TimeQuery) ([]R, forage.Outcome)
	// Time returns a record's time (updated_at, created_at: what the
	// provider orders and filters by), and Key its natural key. Required.
	Time func(R) time.Time
	Key  func(R) string
	// Limit is the most records the provider answers at once: a page of
	// Limit records may have been cut anywhere, in a run of records that
	// share a time too. Required (>= 1).
	Limit int
	// Start is where the feed starts: the Since of the stream's first
	// request. The zero time asks from the provider's beginning.
	Start time.Time
	// Settle is how long the provider's index may take to show a record
	// after its time: records newer than now − Settle are left to a later
	// run (a record indexed late under an earlier time would otherwise be
	// passed for good). 0 trusts the index to be current.
	Settle time.Duration
}

// TimeFeed returns the [Source] of a feed queried by time ("records
// updated since T", at most a page): the cursor is the time of the last
// record delivered and the keys of those delivered at that very time, so
// that records sharing a time are neither skipped nor delivered twice
// (asking "after T" drops the rest of a run of records sharing T that a
// page cut; asking "since T" delivers the run again). The cursor holds at
// most a page of keys.
//
// A page of Limit records may have been cut: its records at its last
// time are left for the next request, which asks since that time. A page
// of Limit records that all share one time cannot be paged past (the
// provider has more at that time than it answers at once): the run stops
// with a [forage.Permanent] error naming the time (ask for a larger
// Limit). A page shorter than Limit, or one that reaches now − Settle,
// is the feed caught up for now. Records before the cursor's time (a
// provider that rounds Since down) are dropped: they were delivered. A
// page out of time order is a [forage.Permanent] error: its cut would be
// meaningless.
//
// It returns an error naming the field for a Config without Fetch, Time
// or Key, or with a Limit under 1 or a negative Settle.
func TimeFeed[R any](cfg TimeFeedConfig[R]) (FetchFunc[R], error) {
	switch {
	case cfg.Fetch == nil:
		return nil, invalid.Must("TimeFeedConfig.Fetch", "be set", "nil")
	case cfg.Time == nil:
		return nil, invalid.Must("TimeFeedConfig.Time", "be set", "nil")
	case cfg.Key == nil:
		return nil, invalid.Must("TimeFeedConfig.Key", "be set", "nil")
	case cfg.Limit < 1:
		return nil, invalid.Must("TimeFeedConfig.Limit", "be >= 1", cfg.Limit)
	case cfg.Settle < 0:
		return nil, invalid.Must("TimeFeedConfig.Settle", "be >= 0", cfg.Settle)
	}
	return func(ctx context.Context, s Slice) (Page[R], forage.Outcome) {
		at := timeCursor{T: cfg.Start}
		if len(s.After) > 0 {
			if err := json.Unmarshal(s.After, &at); err != nil {
				return Page[R]{}, forage.Outcome{Err: forage.Mark(fmt.Errorf("slice: TimeFeed: the cursor %q was not written by a TimeFeed: %w", shown(s.After), ErrInvalidPage), forage.Permanent)}
			}
		}
		recs, out := cfg.Fetch(ctx, TimeQuery{Since: at.T, Limit: cfg.Limit})
		if out.Class() != forage.Success {
			return Page[R]{}, out
		}
		for i := 1; i < len(recs); i++ {
			if cfg.Time(recs[i]).Before(cfg.Time(recs[i-1])) {
				out.Err = forage.Mark(fmt.Errorf("slice: TimeFeed: %w: the provider's page is not in time order (record %d at %v after one at %v)",
					ErrInvalidPage, i, cfg.Time(recs[i]), cfg.Time(recs[i-1])), forage.Permanent)
				return Page[R]{}, out
			}
		}
		cut := len(recs) >= cfg.Limit // the provider may have more than it answered
		// Records before the cursor's time were delivered (a provider that
		// rounds Since down answers them again).
		recs = slices.DeleteFunc(slices.Clone(recs), func(r R) bool { return cfg.Time(r).Before(at.T) })
		next, last := at, true
		if cut {
			if len(recs) == 0 || !cfg.Time(recs[0]).Before(cfg.Time(recs[len(recs)-1])) {
				// Nothing after the cursor's time, or everything at one
				// time: the next request would bring the same page.
				out.Err = forage.Mark(fmt.Errorf("slice: TimeFeed: %w: the provider answered a full page (%d records, its Limit) with no two times after %v to page by: more records share one time than a page holds (or the provider answers records before Since); ask for a larger Limit",
					ErrInvalidPage, cfg.Limit, at.T), forage.Permanent)
				return Page[R]{}, out
			}
			// The page may be cut within its last time: those records are
			// the next request's, which asks since that time, every
			// record before it delivered by this page.
			top := cfg.Time(recs[len(recs)-1])
			recs = recs[:slices.IndexFunc(recs, func(r R) bool { return !cfg.Time(r).Before(top) })]
			next, last = timeCursor{T: top}, false
		}
		if cfg.Settle > 0 {
			horizon := time.Now().Add(-cfg.Settle)
			if i := slices.IndexFunc(recs, func(r R) bool { return cfg.Time(r).After(horizon) }); i >= 0 || next.T.After(horizon) {
				// Too recent to trust the index: left to a later run, the
				// cursor at the last record delivered, never past the
				// horizon (a cut page's last time may lie beyond it, and a
				// record indexed late under a time before it would be
				// passed).
				if i >= 0 {
					recs = recs[:i]
				}
				next, last = at, true
			}
		}
		var fresh []R
		for _, r := range recs {
			if t, k := cfg.Time(r), cfg.Key(r); !t.Equal(at.T) || !slices.Contains(at.K, k) { // not delivered at the cursor's very time
				fresh = append(fresh, r)
			}
		}
		if last { // the cursor is the last record delivered, and the keys delivered at its time
			for _, r := range fresh {
				t, k := cfg.Time(r), cfg.Key(r)
				if !t.Equal(next.T) {
					next = timeCursor{T: t}
				}
				if !slices.Contains(next.K, k) {
					next.K = append(slices.Clone(next.K), k)
				}
			}
		}
		if len(fresh) == 0 && last {
			return Page[R]{Next: s.After, Last: true}, out // nothing new: caught up, the cursor where it was
		}
		return Page[R]{Records: fresh, Next: next.encode(), Last: last}, out
	}, nil
}

// timeCursor is a TimeFeed's cursor: the time of the last record
// delivered, and the keys of those delivered at that very time.
type timeCursor struct {
	T time.Time `json:"t"`
	K []string  `json:"k,omitempty"`
}

func (c timeCursor) encode() []byte {
	b, _ := json.Marshal(c)
	return b
}
