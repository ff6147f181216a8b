package pgstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/forage-go/forage/pgstore"
)

// TestPacerBooksOnlyAhead: many callers waiting on a slow shared pacer
// never book further ahead than BookAhead (plus the slot being booked),
// so a process killed while they wait leaves at most that much debt for
// the processes sharing the key; yet they are all admitted, one interval
// apart. Before, each waiting caller booked its slot at once: 16 callers
// at 10/s left 1.6 s booked.
func TestPacerBooksOnlyAhead(t *testing.T) {
	t.Parallel()
	s := newStore(t, nil)
	const rate, callers = 20.0, 12
	p := newPacer(t, s, pgstore.PacerConfig{Rate: rate, BookAhead: 60 * time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var wg sync.WaitGroup
	admitted := make(chan time.Time, callers)
	for range callers {
		wg.Go(func() {
			if err := p.WaitN(ctx, 1); err != nil {
				t.Errorf("WaitN: %v", err)
				return
			}
			admitted <- time.Now()
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	most := time.Duration(0)
	iv := time.Duration(float64(time.Second) / rate)
	for waiting := true; waiting; {
		select {
		case <-done:
			waiting = false
		case <-time.After(5 * time.Millisecond):
		}
		st, err := p.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		most = max(most, st.Backlog)
	}
	close(admitted)
	n := 0
	for range admitted {
		n++
	}
	if n != callers {
		t.Fatalf("%d of %d callers admitted", n, callers)
	}
	if limit := 60*time.Millisecond + iv; most > limit {
		t.Fatalf("the row was booked %v ahead, want at most BookAhead + one interval = %v", most, limit)
	}
	t.Logf("at most %v booked ahead while %d callers waited at %v/s", most, callers, rate)
}

// TestPacerBookAheadRejectsNegative: a negative BookAhead is refused,
// naming the field.
func TestPacerBookAheadRejectsNegative(t *testing.T) {
	t.Parallel()
	s := newStore(t, nil)
	if _, err := s.NewPacer("k", pgstore.PacerConfig{BookAhead: -time.Second}); err == nil {
		t.Fatal("BookAhead -1s accepted")
	}
}
