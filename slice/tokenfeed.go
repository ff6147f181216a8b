package slice

import (
	"context"
	"encoding/json"
	"fmt"

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
// "next", has_more false with no id to ask after) to a cursor feed's
// [Source]. fetch asks for the page of token ("" for the feed's first
// page) and returns it with its outcome; key returns a record's natural
// key (nil: records are told by their count alone, for a provider that
// never removes a record from a page).
//
// Such a feed gives the next run nothing to ask after: the last page's
// records have no token past them. TokenFeed keeps, as the cursor, the
// token that fetched the last page, how many of its records were
// delivered, and the last one's key. The next run asks for that page
// again and delivers only the records after the last one delivered: the
// provider appended to it, or filled it and gave a token to the pages
// after, which are followed. A page that asks again and finds nothing new
// is "caught up", with nothing written. When the page changed otherwise
// (the last record delivered is gone from it), its records are all
// delivered again: the sink is idempotent, and nothing is skipped.
//
// A cursor that TokenFeed did not write (a stream that switched sources)
// fails the run as [forage.Permanent], naming it. The cursor holds the
// token: a token that is a URL with a credential in it is stored as it
// is, though logs and errors redact it.
func TokenFeed[R any](fetch func(ctx context.Context, token string) (TokenPage[R], forage.Outcome), key func(R) string) FetchFunc[R] {
	return func(ctx context.Context, s Slice) (Page[R], forage.Outcome) {
		var at tokenCursor
		if len(s.After) > 0 {
			if err := json.Unmarshal(s.After, &at); err != nil || at.N < 0 {
				return Page[R]{}, forage.Outcome{Err: forage.Mark(fmt.Errorf("slice: TokenFeed: the cursor %q was not written by a TokenFeed: %w", shown(s.After), ErrInvalidPage), forage.Permanent)}
			}
		}
		tp, out := fetch(ctx, at.T)
		if out.Class() != forage.Success {
			return Page[R]{}, out
		}
		recs := tp.Records[skipDelivered(tp.Records, at, key):]
		if tp.Next != "" {
			if tp.Next == at.T {
				// The page names itself as the next: following it would
				// fetch it for good. FetchFunc's rule for a stuck cursor
				// asks again, then stops with a gap.
				return Page[R]{Next: s.After}, out
			}
			return Page[R]{Records: recs, Next: tokenCursor{T: tp.Next}.encode()}, out
		}
		// The last page for now: the next run asks for it again.
		next := tokenCursor{T: at.T, N: len(tp.Records)}
		if n := len(tp.Records); n > 0 && key != nil {
			next.K = key(tp.Records[n-1])
		}
		if len(recs) == 0 {
			return Page[R]{Next: s.After, Last: true}, out // nothing new: caught up, the cursor where it was
		}
		return Page[R]{Records: recs, Next: next.encode(), Last: true}, out
	}
}

// tokenCursor is a TokenFeed's cursor: the token of the page to ask for,
// and how many of its records were delivered, the last of them keyed K.
type tokenCursor struct {
	T string `json:"t"`
	N int    `json:"n,omitempty"`
	K string `json:"k,omitempty"`
}

func (c tokenCursor) encode() []byte {
	b, _ := json.Marshal(c) // strings and an int: cannot fail
	return b
}

// skipDelivered returns how many records at the head of recs were
// delivered already, by at: its first at.N, when the N-th is still keyed
// at.K; else up to the record keyed at.K wherever it now is; else none
// (the page changed: all of it again, for the idempotent sink).
func skipDelivered[R any](recs []R, at tokenCursor, key func(R) string) int {
	if at.N == 0 {
		return 0
	}
	if key == nil {
		return min(at.N, len(recs))
	}
	if at.N <= len(recs) && key(recs[at.N-1]) == at.K {
		return at.N
	}
	for i := len(recs) - 1; i >= 0; i-- {
		if key(recs[i]) == at.K {
			return i + 1
		}
	}
	return 0
}
