package schedule_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
)

// pager is a list endpoint of one-record pages after an integer cursor:
// each page takes delay; the page after fail (if > 0) answers 500 for
// good; after end (if > 0) the stream is caught up, else its pages never
// end. It counts the pages asked for.
type pager struct {
	delay     time.Duration
	end, fail int64
	calls     atomic.Int64
}

func (*pager) Next(context.Context, []byte, checkpoint.Range) (slice.Slice, bool, error) {
	return slice.Slice{}, true, nil
}

func (p *pager) Fetch(_ context.Context, sl slice.Slice) (slice.Page[int64], forage.Outcome) {
	p.calls.Add(1)
	time.Sleep(p.delay)
	n, _ := strconv.ParseInt(string(sl.After), 10, 64)
	switch {
	case p.fail > 0 && n == p.fail:
		return slice.Page[int64]{}, forage.Outcome{Status: 500}
	case p.end > 0 && n >= p.end:
		return slice.Page[int64]{Next: sl.After, Last: true}, forage.Outcome{Status: 200}
	}
	return slice.Page[int64]{Records: []int64{n}, Next: []byte(strconv.FormatInt(n+1, 10)), Last: p.end > 0 && n+1 >= p.end},
		forage.Outcome{Status: 200}
}

// dropAll is a Sink that writes nothing.
var dropAll = slice.SinkFunc[int64](func(context.Context, slice.Page[int64]) error { return nil })
