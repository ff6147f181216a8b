package slice

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"unicode/utf8"

	"github.com/forage-go/forage"
)

// TokenPage is one answer of a feed paged by opaque tokens: its records,
// oldest first, and the token of the page after it, "" when the provider
// gives none (nothing follows for now).
type TokenPage[R any] struct {
	Records []R
	Next    string
}

// TokenFeed adapts the fetch of a feed paged by opaque tokens whose last
// page carries no token (Slack's next_cursor "", a Link header with no
// "next", which [NextLink] reads, has_more false with no id to ask
// after) to a cursor feed's [Source]. fetch asks for the page of token
// ("" for the feed's first page) and returns it with its outcome; key
// returns a record's natural key, never empty (a record whose key is
// empty stops the run forage.Permanent; nil: records are told by their
// count alone, for a provider that never changes a page but by appending
// to it).
//
// Such a feed gives the next run nothing to ask after: the last page's
// records have no token past them. TokenFeed keeps, as the cursor, the
// token that fetched the last page, how many of its records were
// delivered, and a hash of their keys in order. The next run asks for
// that page again and, when it still begins with exactly those records,
// delivers only those after them: the provider appended to it, or filled
// it and gave a token to the pages after, which are followed. A page that
// asks again and finds nothing new is "caught up", with nothing written:
// one request per run to learn that nothing is new (a host with 200 idle
// streams spends 200 requests a sync on it; such streams run less often,
// or under a request cap with room for it).
// A page that changed otherwise (a record removed, replaced, moved or
// inserted among those delivered) is delivered again whole: the sink is
// idempotent, and nothing is skipped. A page that held delivered records
// and comes back empty with no token (an expired token, a page emptied
// by retention) cannot be resumed from: the run stops [forage.Permanent],
// naming it, rather than be caught up for good while the feed goes on
// elsewhere. A token whose page held nothing yet when it was reached (a
// next page not filled) cannot be told from one that expired when it
// answers nothing: a provider that expires such tokens silently reads as
// caught up, which only a look at the feed's end by other means tells.
//
// A provider that answers page after page with the same records, each
// naming a new token (a nonce in its next link, a proxy that ignores the
// cursor), moves no cursor back, so no cycle shows: with a key, 20 such
// pages in a row stop the run [forage.Permanent], naming it (a page
// repeated once or twice, a head that lost a page's worth between two
// requests, is delivered as it is).
//
// A cursor that TokenFeed did not write (a stream that switched sources)
// fails the run as [forage.Permanent], naming it. The cursor holds the
// token (base64 when it is not UTF-8): a token that is a URL with a
// credential in it is stored as it is, though logs and errors redact it.
func TokenFeed[R any](fetch func(ctx context.Context, token string) (TokenPage[R], forage.Outcome), key func(R) string) FetchFunc[R] {
	return func(ctx context.Context, s Slice) (Page[R], forage.Outcome) {
		at, err := decodeTokenCursor(s.After)
		if err != nil {
			return Page[R]{}, forage.Outcome{Err: forage.Mark(fmt.Errorf("slice: TokenFeed: the cursor %q was not written by a TokenFeed (%v): %w", shown(s.After), err, ErrInvalidPage), forage.Permanent)}
		}
		tp, out := fetch(ctx, at.token())
		if out.Class() != forage.Success {
			return Page[R]{}, out
		}
		if key != nil {
			for i, r := range tp.Records {
				if key(r) == "" {
					// Told by count alone, a page that dropped its oldest
					// record as it took a new one read as unchanged: 5
					// records of 10 delivered, every run caught up.
					out.Err = forage.Mark(fmt.Errorf("slice: TokenFeed: %w: record %d of the page has an empty key (TokenFeed's key; nil tells records by their count)", ErrInvalidPage, i), forage.Permanent)
					return Page[R]{}, out
				}
			}
		}
		if tp.Next != "" && tp.Next == at.token() {
			// The page names itself as the next: following it would fetch
			// it for good. Asked again, then a stop with a gap.
			out.Err = forage.Mark(fmt.Errorf("slice: TokenFeed: %w: the provider named the token it was asked with as the next page's", ErrInvalidPage), forage.Transient)
			return Page[R]{}, out
		}
		if at.N > 0 && len(tp.Records) == 0 && tp.Next == "" {
			out.Err = forage.Mark(fmt.Errorf("slice: TokenFeed: %w: the page this feed was on (%d records delivered) came back empty, naming no next page (an expired token, or a page emptied): the feed cannot be resumed from it (start the stream again, or from a token of your own)", ErrInvalidPage, at.N), forage.Permanent)
			return Page[R]{}, out
		}
		recs := tp.Records
		if at.N > 0 && at.N <= len(recs) && at.H == keysHash(recs[:at.N], key) {
			recs = recs[at.N:] // the page still begins with what was delivered
		}
		if tp.Next != "" {
			next := newTokenCursor[R](tp.Next, nil, nil)
			if key != nil && len(tp.Records) > 0 {
				// A page that repeats the one before, under a new token (a
				// nonce in the next link, a proxy that ignores the
				// cursor), is a loop no cursor shows: fetched and
				// delivered again until the envelope ran out, every run.
				// Once is a head that lost a page's worth in between; a
				// few in a row is the provider's loop.
				next.P = keysHash(tp.Records, key)
				if next.P == at.P {
					if next.S = at.S + 1; next.S >= maxSamePages {
						out.Err = forage.Mark(fmt.Errorf("slice: TokenFeed: %w: the provider answered %d pages in a row with the same records, each naming a new token: its tokens do not move the feed", ErrInvalidPage, next.S+1), forage.Permanent)
						return Page[R]{}, out
					}
				}
			}
			return Page[R]{Records: recs, Next: next.encode()}, out
		}
		// The last page for now: the next run asks for it again.
		next := newTokenCursor(at.token(), tp.Records, key)
		if len(recs) == 0 {
			return Page[R]{Next: s.After, Last: true}, out // nothing new: caught up, the cursor where it was
		}
		return Page[R]{Records: recs, Next: next.encode(), Last: true}, out
	}
}

// tokenCursor is a TokenFeed's cursor: the token of the page to ask for
// (T, or TB when it is not UTF-8), how many of its records were delivered
// (N), and the hash of their keys in order (H). Of a page that a page
// before it named, the hash of that page's keys (P) and how many pages in
// a row before it repeated the one before them (S). V marks it as
// TokenFeed's.
type tokenCursor struct {
	V  int    `json:"tf"`
	T  string `json:"t,omitempty"`
	TB []byte `json:"tb,omitempty"`
	N  int    `json:"n,omitempty"`
	H  uint64 `json:"h,omitempty"`
	P  uint64 `json:"p,omitempty"`
	S  int    `json:"s,omitempty"`
}

// tokenCursorV is the version a TokenFeed cursor is written with.
const tokenCursorV = 1

// newTokenCursor is the cursor of a page of token whose records delivered
// are recs.
func newTokenCursor[R any](token string, recs []R, key func(R) string) tokenCursor {
	c := tokenCursor{V: tokenCursorV, N: len(recs)}
	if utf8.ValidString(token) {
		c.T = token
	} else {
		c.TB = []byte(token) // JSON would replace its invalid bytes
	}
	if len(recs) > 0 {
		c.H = keysHash(recs, key)
	}
	return c
}

func (c tokenCursor) token() string {
	if c.TB != nil {
		return string(c.TB)
	}
	return c.T
}

func (c tokenCursor) encode() []byte {
	b, _ := json.Marshal(c) // strings, bytes and numbers: cannot fail
	return b
}

// decodeTokenCursor reads a cursor encode wrote; an empty one is the
// feed's start.
func decodeTokenCursor(b []byte) (tokenCursor, error) {
	if len(b) == 0 {
		return tokenCursor{V: tokenCursorV}, nil
	}
	var c tokenCursor
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	switch err := d.Decode(&c); {
	case err != nil:
		return c, err
	case c.V != tokenCursorV || !bytes.HasPrefix(b, []byte(`{"tf":`)):
		return c, errors.New(`no "tf" version`)
	case c.N < 0 || c.S < 0:
		return c, errors.New("a negative count")
	}
	return c, nil
}

// keysHash hashes the keys of recs in order (nil key: their count).
func keysHash[R any](recs []R, key func(R) string) uint64 {
	h := fnv.New64a()
	for _, r := range recs {
		if key != nil {
			k := key(r)
			var n [8]byte
			for i := range n {
				n[i] = byte(len(k) >> (8 * i))
			}
			h.Write(n[:]) // the length first: ("ab","c") is not ("a","bc")
			h.Write([]byte(k))
		} else {
			h.Write([]byte{1})
		}
	}
	return h.Sum64() | 1 // never 0: a hash is always written
}
