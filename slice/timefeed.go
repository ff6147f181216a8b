package slice

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/forage-go/forage"
)

// TimeQuery is one request of a feed queried by time: the records whose
// time is at or after Since (ties included: the provider's ">=", or its
// "since"), oldest first, at most Limit of them. Since may lie between the
// provider's units: past a page of one time (see [TimeFeed]) it is that
// time and a nanosecond. Round it up to the unit: rounded down (a Unix
// second, RFC 3339 without fractions), it asks for that time again, the
// same page answers, and the run is caught up with nothing past it ever
// asked for. A provider whose filter leaves Since out ("updated_after",
// ">") is asked for Since, rounded up, less its time unit (a millisecond, a
// second): asked for Since itself, the records at the time where a full
// page was cut are never answered, and the run is caught up without them.
// The stream's first request asks for the zero Since unless
// [TimeFeedConfig.Start] is set: send it as the provider's beginning (the
// epoch, or no parameter), not as its Unix time (year 1 is -62135596800).
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
	// provider orders and filters by), and Key its natural key, never
	// empty (a record whose key is empty stops the run
	// forage.Permanent). Required.
	Time func(R) time.Time
	Key  func(R) string
	// Limit is the most records a request asks for: a page of Limit
	// records may have been cut anywhere, in a run of records that share
	// a time too. A provider whose pages are smaller (it caps limit=100 at
	// 50, silently) is paged past as well: a page as long as the longest
	// it answered may have been cut too, and the page after it is asked
	// (a request more when a run meets a page that long). Runs of records
	// that share one time must be shorter than the provider's page.
	// Required (>= 2).
	Limit int
	// Start is where the feed starts: the Since of the stream's first
	// request. The zero time asks from the provider's beginning.
	Start time.Time
	// Settle is how long the provider's index may take to show a record
	// after its time: records newer than now − Settle are left to a later
	// run (a record indexed late under an earlier time would otherwise be
	// passed for good, and the run said caught up). Zero means
	// DefaultSettle; [NoSettle] trusts the index to be current, and
	// delivers each record as soon as it is shown.
	Settle time.Duration
}

// DefaultSettle is [TimeFeedConfig].Settle when it is zero: a minute, far
// over how late the search indexes of common APIs show a record, so the
// newest minute is collected a minute late rather than with a hole. (With
// no Settle, an index that showed records up to 2.5 s late lost 27 of
// 1,557 for good, every run said caught up.)
const DefaultSettle = time.Minute

// NoSettle is a [TimeFeedConfig].Settle that trusts the provider's index to
// be current: for a provider that shows each record at once, or dates it
// when it is shown.
const NoSettle time.Duration = -1

// TimeFeed returns the [Source] of a feed queried by time ("records
// updated since T", at most a page): the cursor is the time of the last
// record delivered and the keys of those delivered at that very time, so
// that records sharing a time are neither skipped nor delivered twice
// (asking "after T" drops the rest of a run of records sharing T that a
// page cut; asking "since T" delivers the run again). The cursor holds at
// most a page of key hashes.
//
// A page of Limit records may have been cut: its records at its last
// time are left for the next request, which asks since that time. A page
// of Limit records that all share one time cannot be paged past (the
// provider has more at that time than it answers at once): the run stops
// with a [forage.Permanent] error naming the time (ask for a larger
// Limit). A page shorter than Limit, and shorter than the longest the
// provider answered (as the cursor holds it), or one that reaches now −
// Settle, is the feed caught up for now; one as long as the longest may
// be a provider's own full page, smaller than Limit, and is paged past as
// a cut one (read as the end, a provider capping Limit 100 at 50 had a
// run say caught up with its backlog unread, a page of it per run).
// Records before the cursor's time (a provider that rounds Since down)
// are dropped: they were delivered. Asked past the last time delivered,
// a provider that answers a page as long as its longest, every record
// at or before that time, is asked since now: answering that page again,
// it does not honour Since (a fetch that forgot to send it answers the
// feed's first page for good); answering records after it, it rounds
// Since down with more records in its unit than its page holds; either
// way nothing after them can be asked for, and the run stops
// [forage.Permanent], naming it. Answering nothing, it rounds Since down
// and the feed is caught up (two requests more per run while the feed
// ends so). A page out of time order is a
// [forage.Permanent] error: its cut would be meaningless.
//
// What "since T" cannot see it does not deliver: a record whose time
// moves back behind the cursor (an update dated earlier than the last
// delivered) is not delivered again; set Settle to cover how late the
// provider may date a record. A record a page holds twice is delivered
// twice, for the idempotent sink. A provider that lowers its page size
// below the longest page it answered before reads as caught up after
// each page until its pages grow back. A page short of Limit that holds
// one time alone, as long as the longest the provider answered, cannot be
// told from the end: it is asked again, and then past its time (a
// request more per run while the feed ends at such a time); records past
// it that the provider answers, since that time, only with that page stop
// the run forage.Permanent (it pages fewer than Limit and more records
// share that time than its page holds: nothing after them can be asked
// for). Read as the end, every later run was answered the same page and
// caught up, nothing after it delivered.
//
// It returns an error naming the field for a Config without Fetch, Time
// or Key, or with a Limit under 2 or a negative Settle other than
// NoSettle.
func TimeFeed[R any](cfg TimeFeedConfig[R]) (FetchFunc[R], error) {
	switch {
	case cfg.Fetch == nil:
		return nil, invalid.Must("TimeFeedConfig.Fetch", "be set", "nil")
	case cfg.Time == nil:
		return nil, invalid.Must("TimeFeedConfig.Time", "be set", "nil")
	case cfg.Key == nil:
		return nil, invalid.Must("TimeFeedConfig.Key", "be set", "nil")
	case cfg.Limit < 2:
		// A page of one record is always "at one time": none could be
		// paged past.
		return nil, invalid.Must("TimeFeedConfig.Limit", "be >= 2", cfg.Limit)
	case cfg.Settle < 0 && cfg.Settle != NoSettle:
		return nil, invalid.Must("TimeFeedConfig.Settle", "be >= 0 or NoSettle", cfg.Settle)
	}
	switch cfg.Settle {
	case 0:
		cfg.Settle = DefaultSettle
	case NoSettle:
		cfg.Settle = 0
	}
	return func(ctx context.Context, s Slice) (Page[R], forage.Outcome) {
		at, err := decodeTimeCursor(s.After, cfg.Start)
		if err != nil {
			return Page[R]{}, forage.Outcome{Err: forage.Mark(fmt.Errorf("slice: TimeFeed: the cursor %q was not written by a TimeFeed (%v): %w", shown(s.After), err, ErrInvalidPage), forage.Permanent)}
		}
		// The horizon is taken before the request: what the index did not
		// show when it was asked may be older than what the answer holds
		// (a slow answer, read against the clock at its end, passed it).
		horizon := time.Now().Add(-cfg.Settle)
		probe, since := at.P, at.T
		at.P = 0
		switch probe {
		case probePast:
			since = at.T.Add(time.Nanosecond)
		case probeNow:
			since = time.Now().UTC()
		}
		recs, out := cfg.Fetch(ctx, TimeQuery{Since: since, Limit: cfg.Limit})
		if out.Class() != forage.Success {
			return Page[R]{}, out
		}
		for i, r := range recs {
			if cfg.Key(r) == "" {
				// Records at the cursor's time are told apart by their
				// keys: one with an empty key was taken for delivered.
				out.Err = forage.Mark(fmt.Errorf("slice: TimeFeed: %w: record %d of the page has an empty key (TimeFeedConfig.Key)", ErrInvalidPage, i), forage.Permanent)
				return Page[R]{}, out
			}
		}
		for i := 1; i < len(recs); i++ {
			if cfg.Time(recs[i]).Before(cfg.Time(recs[i-1])) {
				out.Err = forage.Mark(fmt.Errorf("slice: TimeFeed: %w: the provider's page is not in time order (record %d at %v after one at %v)",
					ErrInvalidPage, i, cfg.Time(recs[i]), cfg.Time(recs[i-1])), forage.Permanent)
				return Page[R]{}, out
			}
		}
		if probe == probeNow {
			// Asked since now, after a page past the cursor's time that
			// held only records at or before it (see below).
			switch {
			case len(recs) > 0 && !cfg.Time(recs[0]).After(at.T):
				out.Err = forage.Mark(fmt.Errorf("slice: TimeFeed: %w: the provider answers records at or before %v whether asked since %v or since now: it does not honour Since (does the fetch send it?); nothing after them can be asked for",
					ErrInvalidPage, at.T.UTC(), at.T.Add(time.Nanosecond).UTC()), forage.Permanent)
				return Page[R]{}, out
			case len(recs) > 0:
				out.Err = forage.Mark(fmt.Errorf("slice: TimeFeed: %w: since %v the provider answers only records at or before it, as many as its longest page, and it has records after it: it rounds Since down with more records in its unit than its page holds; nothing after them can be asked for",
					ErrInvalidPage, at.T.Add(time.Nanosecond).UTC()), forage.Permanent)
				return Page[R]{}, out
			}
			// Nothing since now: a provider that rounds Since down, its
			// last unit as long as its longest page. Caught up; the next
			// run asks past the cursor's time again (asked since now, it
			// would miss what comes before now), from a cursor this run
			// did not pass (R alternates: the probe past it, from the
			// same cursor, is a cycle to the runner).
			next := at
			next.P, next.R = probePast, 1-at.R
			b, err := next.encode()
			if err != nil {
				out.Err = forage.Mark(fmt.Errorf("slice: TimeFeed: %w: the cursor's time %v cannot be kept: %v", ErrInvalidPage, next.T, err), forage.Permanent)
				return Page[R]{}, out
			}
			return Page[R]{Next: b, Last: true}, out
		}
		if probe == probePast {
			if len(recs) >= min(cfg.Limit, max(at.G, 2)) && !cfg.Time(recs[len(recs)-1]).After(at.T) {
				// Asked past the cursor's time, a page as long as the
				// longest the provider answered, every record at or before
				// it: a provider that does not honour Since (a fetch that
				// forgot to send it answers the feed's first page for
				// good; read as the end, every run was caught up with the
				// feed growing unread behind that page), or one that
				// rounds it down, its last unit as long as its page. Asked
				// since now, the first answers that page again, the
				// second nothing (caught up) or the records after (it
				// cannot be paged past them).
				next := at
				next.P = probeNow
				b, err := next.encode()
				if err != nil {
					out.Err = forage.Mark(fmt.Errorf("slice: TimeFeed: %w: the cursor's time %v cannot be kept: %v", ErrInvalidPage, next.T, err), forage.Permanent)
					return Page[R]{}, out
				}
				return Page[R]{Next: b}, out
			}
			// Is there anything past the cursor's time? (Records at it, or
			// before it, are a provider that rounds Since down; records
			// too recent to trust are not there yet.)
			recs = slices.DeleteFunc(slices.Clone(recs), func(r R) bool {
				return !cfg.Time(r).After(at.T) || cfg.Settle > 0 && cfg.Time(r).After(horizon)
			})
			if len(recs) == 0 {
				return Page[R]{Next: s.After, Last: true}, out // nothing past it: caught up, asking past it again next run
			}
			next := at
			next.P = probeAgain // ask since the time again: a page of that time alone now is a provider that cannot be paged past it
			b, err := next.encode()
			if err != nil {
				out.Err = forage.Mark(fmt.Errorf("slice: TimeFeed: %w: the cursor's time %v cannot be kept: %v", ErrInvalidPage, next.T, err), forage.Permanent)
				return Page[R]{}, out
			}
			return Page[R]{Next: b}, out
		}
		cut := len(recs) >= cfg.Limit // the provider may have more than it answered
		// A page short of Limit but as long as any the provider answered
		// may be cut too: a provider whose pages are smaller than Limit
		// (it caps limit=100 at 50, silently) answers a full page of its
		// own that way. It is paged past as a cut one, when it spans more
		// than one time: the page after it tells, at the cost of a
		// request when a run meets its longest page yet.
		most := max(at.G, len(recs))
		long := !cut && len(recs) >= max(at.G, 2)
		// Records before the cursor's time were delivered (a provider that
		// rounds Since down answers them again).
		recs = slices.DeleteFunc(slices.Clone(recs), func(r R) bool { return cfg.Time(r).Before(at.T) })
		mayCut := long && len(recs) > 0 && cfg.Time(recs[0]).Before(cfg.Time(recs[len(recs)-1]))
		// A page as long as the longest, of one (settled) time, cannot be
		// told from the end: it is asked again, and then past its time.
		// Read as the end, it was the end for good: every later run was
		// answered the same page (a provider capping Limit 100 at 5, with
		// 7 records sharing a time: 15 of 30 delivered, every run caught
		// up).
		oneTime := long && len(recs) > 0 && !mayCut && (cfg.Settle == 0 || !cfg.Time(recs[0]).After(horizon))
		next, last := at, true
		next.G = most
		if cut || mayCut {
			if len(recs) == 0 {
				out.Err = forage.Mark(fmt.Errorf("slice: TimeFeed: %w: the provider answered a full page (Limit %d) of records all before Since %v: it rounds Since down, and as many records share the unit it rounds to; the next request would bring the same page",
					ErrInvalidPage, cfg.Limit, at.T.UTC()), forage.Permanent)
				return Page[R]{}, out
			}
			if shared := cfg.Time(recs[0]); !shared.Before(cfg.Time(recs[len(recs)-1])) {
				out.Err = forage.Mark(fmt.Errorf("slice: TimeFeed: %w: the provider answered a full page (Limit %d) whose records at or after Since all share the time %v: as many or more records share it than a page holds, and none can be paged past; ask for a larger Limit",
					ErrInvalidPage, cfg.Limit, shared.UTC()), forage.Permanent)
				return Page[R]{}, out
			}
			// The page may be cut within its last time: those records are
			// the next request's, which asks since that time, every
			// record before it delivered by this page.
			top := cfg.Time(recs[len(recs)-1])
			recs = recs[:slices.IndexFunc(recs, func(r R) bool { return !cfg.Time(r).Before(top) })]
			next, last = timeCursor{V: timeCursorV, T: top, G: most}, false
		}
		if cfg.Settle > 0 {
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
				next.G = most
			}
		}
		var fresh []R
		for _, r := range recs {
			if t, k := cfg.Time(r), keyHash(cfg.Key(r)); !t.Equal(at.T) || !slices.Contains(at.K, k) { // not delivered at the cursor's very time
				fresh = append(fresh, r)
			}
		}
		if last { // the cursor is the last record delivered, and the keys delivered at its time
			next.K = slices.Clone(next.K)
			for _, r := range fresh {
				t, k := cfg.Time(r), keyHash(cfg.Key(r))
				if !t.Equal(next.T) {
					next = timeCursor{V: timeCursorV, T: t, G: most}
				}
				if !slices.Contains(next.K, k) {
					next.K = append(next.K, k)
				}
			}
		}
		if oneTime && last {
			switch {
			case len(fresh) > 0:
				last = false // delivered: asked again, with nothing new, it is asked past its time
			case probe == probeAgain:
				out.Err = forage.Mark(fmt.Errorf("slice: TimeFeed: %w: since %v the provider answers only %d records at that time, as many as its longest page, and it has records after that time: it pages fewer than Limit and as many records share that time as its page holds, or more, and none after them can be asked for",
					ErrInvalidPage, at.T.UTC(), len(recs)), forage.Permanent)
				return Page[R]{}, out
			default:
				next := at
				next.P = probePast
				b, err := next.encode()
				if err != nil {
					out.Err = forage.Mark(fmt.Errorf("slice: TimeFeed: %w: the cursor's time %v cannot be kept: %v", ErrInvalidPage, next.T, err), forage.Permanent)
					return Page[R]{}, out
				}
				return Page[R]{Next: b}, out
			}
		}
		if len(fresh) == 0 && last {
			return Page[R]{Next: s.After, Last: true}, out // nothing new: caught up, the cursor where it was
		}
		b, err := next.encode()
		if err != nil {
			out.Err = forage.Mark(fmt.Errorf("slice: TimeFeed: %w: a record's time %v cannot be kept in the cursor: %v", ErrInvalidPage, next.T, err), forage.Permanent)
			return Page[R]{}, out
		}
		return Page[R]{Records: fresh, Next: b, Last: last}, out
	}, nil
}

// timeCursor is a TimeFeed's cursor: the time of the last record
// delivered (T, in UTC), the hashes of the keys of those delivered at
// that very time (K: bounded by a page, and whatever bytes a key holds),
// and the most records the provider answered at once (G). V marks it as
// TimeFeed's.
type timeCursor struct {
	V int       `json:"tt"`
	T time.Time `json:"t"`
	K []uint64  `json:"k,omitempty"`
	G int       `json:"g,omitempty"`
	// P is where a page of the cursor's time alone, as long as the
	// longest, left the feed: probePast asks past that time, probeAgain
	// asks since it again, as there are records past it, and probeNow
	// asks since now, as past it the provider answered only records at or
	// before it.
	P int `json:"p,omitempty"`
	// R alternates each time a probe since now finds the feed caught up,
	// so the cursor it leaves is not one the run passed (see probeNow).
	R int `json:"r,omitempty"`
}

// timeCursorV is the version a TimeFeed cursor is written with.
const timeCursorV = 1

// The states of timeCursor.P.
const (
	probePast  = 1 // ask past the cursor's time
	probeAgain = 2 // there are records past it: ask since it again
	probeNow   = 3 // past it, only records at or before it: ask since now
)

// encode writes c, its time in UTC: RFC 3339 offsets have no seconds,
// and a zone whose offset has them was written shifted.
func (c timeCursor) encode() ([]byte, error) {
	c.T = c.T.UTC()
	return json.Marshal(c)
}

// decodeTimeCursor reads a cursor encode wrote; an empty one is the
// feed's start.
func decodeTimeCursor(b []byte, start time.Time) (timeCursor, error) {
	if len(b) == 0 {
		return timeCursor{V: timeCursorV, T: start}, nil
	}
	var c timeCursor
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&c); err != nil {
		return c, err
	}
	if c.V != timeCursorV || !bytes.HasPrefix(b, []byte(`{"tt":`)) {
		return c, errors.New(`no "tt" version`)
	}
	if c.G < 0 {
		return c, errors.New("a negative count")
	}
	if c.P < 0 || c.P > probeNow || c.R < 0 || c.R > 1 {
		return c, errors.New("an unknown state")
	}
	return c, nil
}

// keyHash hashes a record's key for a cursor: FNV-1a, 64 bits.
func keyHash(k string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(k))
	return h.Sum64()
}
