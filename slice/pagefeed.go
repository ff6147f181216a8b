package slice

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/forage-go/forage"
)

// PageQuery is one request of a list paged by number: the page's number
// (from 1), the same page as an offset (the records the scan's pages
// before it answered: (Number − 1) × Size while they were full), and the
// page size. A provider that numbers its pages from 0 is asked for
// Number − 1. Ask by number or by offset, not both: a provider that
// answers pages smaller than Size is read without a gap either way (its
// page Number is its own page of that number; Offset counts what it
// answered).
type PageQuery struct {
	Number, Offset, Size int
}

// PageFeedConfig configures [PageFeed].
type PageFeedConfig[R any] struct {
	// Fetch asks the provider for page q of the list, newest first, and
	// returns its records with the outcome. Required.
	Fetch func(ctx context.Context, q PageQuery) ([]R, forage.Outcome)
	// Key returns a record's natural key, never empty: a record whose key
	// is empty stops the run forage.Permanent. Required.
	Key func(R) string
	// Size is how many records a page is asked for (PageQuery.Size). A
	// provider that answers fewer (it caps limit=100 at 50, silently, or
	// answers its default page to a request that does not pass
	// PageQuery.Size) is read whole all the same, so Size should be what
	// the provider answers: a smaller one costs requests, a larger one a
	// request per scan that ends without meeting the last head, never a
	// record. Required (>= 1).
	Size int
}

// PageFeed returns the [Source] of a list paged by number (?page=N, or
// ?offset=…&limit=…) and ordered newest first, whose new records enter at
// its head: the "list invoices" of most REST APIs. Such a list cannot be
// followed by its page numbers: the last page read is where the oldest
// records are, and the new ones are on page 1, which a cursor at the end
// never asks again (a collector that did said "caught up" run after run
// while the list grew).
//
// PageFeed reads the list in scans. A scan asks page 1, 2, … and delivers
// each page's records, until a page holds a record of the head the scan
// before it began with (everything newer than it is delivered), or a page
// comes back empty (or, after a short page, is refused 400, 404, 416 or
// 422, or repeats a short page past the first: a provider's own ways of
// answering a page past the end); the run is then caught up, and the next
// run's scan starts at page 1 again. After a full page, such a refusal
// cannot be told from a provider that refuses pages past a depth while
// the list goes on (GitHub's search answers 422 past its 1,000th result):
// it is the provider's answer, forage.Permanent, at that page run after
// run, never the end. So a Django REST Framework list whose length is a
// multiple of Size stops there until it grows, and a list deeper than
// its provider pages is read by time (TimeFeed, "created since") instead.
// The first scan reads the whole list. A page
// shorter than Size does not end a scan: the page after it is asked (one
// request more for a scan that does not meet the last head), since a
// provider whose pages are smaller than Size, or vary, has more after it
// (read as the end, a first page of 50 where Size asked 100 left every
// later page unread, and every run said caught up). The next page is
// asked at the next number, and at the offset of the records answered so
// far, always for Size records, so a provider that caps the page size is
// read whole whether it pages by number or by offset, and a list that was
// short when its scan began and grows fast is read a whole Size at a time
// (paged at the size of a short first page, a list of 3 growing by 5 a
// request, one request a run, never caught up again).
// The cursor keeps the page a scan is at, so a run that stops mid-scan
// resumes there, and the keys (as hashes) of the head the last scan began
// with: at most 3 × Size hashes. Records that entered the head during a
// scan push the rest to later pages, where they are delivered again (the
// sink is idempotent); a record of the last head the next scan meets
// again was delivered, and is not delivered again.
//
// What page numbers cannot show it does not deliver: a list whose order
// changes other than by records entering its head (ordered by update, not
// creation: use [TimeFeed] with the provider's "updated since"), a record
// deleted during a scan (the records after it move up a place, and one
// may cross the page boundary behind the scan), and a record changed in
// place. A list ordered oldest first, whose new records enter at its end,
// is a [TokenFeed] over the page numbers.
//
// A page whose records are those of the page before it is a page's worth
// of records that entered the head in between, and the scan goes on;
// twenty such pages in a row are a provider that ignores the page
// parameter, and the run stops [forage.Permanent], naming it, rather than
// page for ever (an endpoint that is not paged at all is not a PageFeed:
// it answers its whole list as every page). A cursor
// PageFeed did not write fails the run as [forage.Permanent]. It returns an error naming the field
// for a Config without Fetch or Key, or with a Size under 1.
func PageFeed[R any](cfg PageFeedConfig[R]) (FetchFunc[R], error) {
	switch {
	case cfg.Fetch == nil:
		return nil, invalid.Must("PageFeedConfig.Fetch", "be set", "nil")
	case cfg.Key == nil:
		return nil, invalid.Must("PageFeedConfig.Key", "be set", "nil")
	case cfg.Size < 1:
		return nil, invalid.Must("PageFeedConfig.Size", "be >= 1", cfg.Size)
	}
	return func(ctx context.Context, s Slice) (Page[R], forage.Outcome) {
		at, err := decodePageCursor(s.After)
		if err != nil {
			return Page[R]{}, forage.Outcome{Err: forage.Mark(fmt.Errorf("slice: PageFeed: the cursor %q was not written by a PageFeed (%v): %w", shown(s.After), err, ErrInvalidPage), forage.Permanent)}
		}
		n := max(at.P, 1)
		if at.P > 1 && at.Z != cfg.Size {
			// Size changed mid-scan (a new page size deployed): page P
			// of the new size is not where the scan was (asked at the
			// new offset, records 20-29 of 40 went unread for good). The
			// scan starts again at page 1, the last scan's head kept.
			n, at.H, at.L, at.S, at.O = 1, nil, nil, 0, 0
		}
		off := 0 // the records the scan's pages answered so far
		if n > 1 {
			if off = at.O; off == 0 {
				off = (n - 1) * at.Z // a cursor written before O: every page before this one was full
			}
		}
		recs, out := cfg.Fetch(ctx, PageQuery{Number: n, Offset: off, Size: cfg.Size})
		// past: the page before this one was short, so this one asks past
		// what is likely the list's end, which providers answer their own
		// way: WordPress 400, Django REST Framework 404, others the last
		// page again. Each is the end (read as a failure, the first scan
		// of such a list, whatever its length, never finished).
		full := cfg.Size // a page the provider answered whole
		if n > 2 && at.C > 0 {
			full = at.C // a provider that pages smaller than Size, as far as the scan shows
		}
		past := n > 1 && len(at.L) < full
		if past && out.Class() == forage.Permanent && slices.Contains(pastEndStatus[:], out.Status) {
			recs, out.Status, out.Err = nil, http.StatusNoContent, nil // no page there: read as an empty one
		}
		if out.Class() != forage.Success {
			return Page[R]{}, out
		}
		hashes := make([]uint64, len(recs))
		for i, r := range recs {
			k := cfg.Key(r)
			if k == "" {
				// Records are told apart by their keys: with every key ""
				// (a field the JSON tags left zero), the next scan met the
				// last head on page 1 at once, and 5 new records of 10
				// were never delivered, every run caught up.
				out.Err = forage.Mark(fmt.Errorf("slice: PageFeed: %w: record %d of page %d has an empty key (PageFeedConfig.Key)", ErrInvalidPage, i, n), forage.Permanent)
				return Page[R]{}, out
			}
			hashes[i] = keyHash(k)
		}
		same, repeat := 0, false // pages in a row that repeat the one before
		if repeat = n > 1 && len(hashes) > 0 && slices.Equal(hashes, at.L); repeat && !(past && n > 2) {
			// A whole page's worth entered the head in between (the page
			// moved down by one), or the provider ignores the page
			// parameter, which a few in a row tell.
			if same = at.S + 1; same >= maxSamePages {
				out.Err = forage.Mark(fmt.Errorf("slice: PageFeed: %w: the provider answered pages %d to %d with the same records: it ignores the page parameter",
					ErrInvalidPage, n-same, n), forage.Permanent)
				return Page[R]{}, out
			}
		}
		next := pageCursor{V: pageCursorV, P: n + 1, Z: cfg.Size, O: off + len(recs), K: at.K, H: at.H, L: hashes, S: same}
		switch {
		case n == 1 && len(recs) < cfg.Size:
			// A short first page: a list that short, or a provider whose
			// pages are smaller than Size. Until a page longer than it
			// shows the list was that short, it is the provider's page.
			next.C = len(recs)
		case len(recs) <= at.C:
			next.C = at.C
		}
		if n == 1 {
			next.H = hashes // the head this scan begins with
		}
		var fresh []R
		met := false // the page holds a record of the last scan's head
		for i, r := range recs {
			if slices.Contains(at.K, hashes[i]) {
				met = true
				continue // delivered by an earlier scan
			}
			fresh = append(fresh, r)
		}
		// A short page is not the end: a provider whose pages vary, or
		// one smaller than Size, has more after it. The page after it
		// tells, one request per scan that does not meet the last head.
		// A short page answered again is the end too (a provider that
		// clamps the page number to its last, or a page's worth that
		// entered the head, with nothing after the records it repeats),
		// past the first page: a short first page answered again may be
		// a provider's smaller page, moved down by as many new records.
		last := met || len(recs) == 0 || (past && repeat && n > 2)
		if last {
			// The scan is over: the next begins at page 1, and stops at
			// this one's head.
			next = pageCursor{V: pageCursorV, K: next.H}
		}
		b, err := json.Marshal(next)
		if err != nil {
			out.Err = forage.Mark(fmt.Errorf("slice: PageFeed: the cursor: %w", err), forage.Permanent)
			return Page[R]{}, out
		}
		if len(fresh) == 0 && bytes.Equal(b, s.After) {
			return Page[R]{Next: s.After, Last: true}, out // nothing new: caught up, the cursor where it was
		}
		return Page[R]{Records: fresh, Next: b, Last: last}, out
	}, nil
}

// pageCursor is a PageFeed's cursor: the page the scan under way asks
// next (P; 0 when none is under way), the key hashes of the head the last
// finished scan began with (K), of the head the scan under way began with
// (H), and of the last page it read (L), how many pages in a row
// repeated the one before (S), the Size the scan was begun with (Z), and
// how many records the scan's pages answered so far, the next page's
// Offset (O; 0 in a cursor written before it: (P - 1) × Z), and the
// length of a short first page no later page of the scan exceeded, the
// provider's own page as far as the scan shows (C; 0: none). V marks it
// as PageFeed's.
type pageCursor struct {
	V int      `json:"pf"`
	P int      `json:"p,omitempty"`
	Z int      `json:"z,omitempty"`
	O int      `json:"o,omitempty"`
	C int      `json:"c,omitempty"`
	K []uint64 `json:"k,omitempty"`
	H []uint64 `json:"h,omitempty"`
	L []uint64 `json:"l,omitempty"`
	S int      `json:"s,omitempty"`
}

// maxSamePages is how many pages in a row answered with the records of the
// page before them tell a provider that ignores the page parameter: one
// is a page's worth of records that entered the head in between, and
// after such a shift a list that stopped growing answers the page the
// scan is at with the records it just read, as long as it is asked.
const maxSamePages = 20

// pastEndStatus are the statuses a provider answers a page past its
// list's end with, when it answers no empty page: 400 (WordPress's
// rest_post_invalid_page_number), 404 (Django REST Framework's "Invalid
// page."), 416 and 422 (an offset out of range). After a short page,
// PageFeed reads them as an empty page.
var pastEndStatus = [...]int{http.StatusBadRequest, http.StatusNotFound, http.StatusRequestedRangeNotSatisfiable, http.StatusUnprocessableEntity}

// pageCursorV is the version a PageFeed cursor is written with.
const pageCursorV = 1

// decodePageCursor reads a cursor PageFeed wrote; an empty one is the
// list's first scan.
func decodePageCursor(b []byte) (pageCursor, error) {
	if len(b) == 0 {
		return pageCursor{V: pageCursorV}, nil
	}
	var c pageCursor
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&c); err != nil {
		return c, err
	}
	if c.V != pageCursorV || !bytes.HasPrefix(b, []byte(`{"pf":`)) {
		return c, errors.New(`no "pf" version`)
	}
	if c.P < 0 || c.S < 0 || c.Z < 0 || c.O < 0 || c.C < 0 {
		return c, errors.New("a negative count")
	}
	return c, nil
}
