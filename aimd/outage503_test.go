package aimd_test

import (
	"testing"
	"time"

	"github.com/forage-go/forage/aimd"
)

// TestA503ShedderThatCountsRefusals: a 503 shedder (no Retry-After) whose
// limiter counts refused requests too (a sliding log): over the limit
// every request is refused until the client slows down, which reads as an
// outage. The outage's slow descent lets it out: at least half of what it
// can serve is served over two minutes. (Held at its rate through the
// outage reading, it served 1.5% for good.)
func TestA503ShedderThatCountsRefusals(t *testing.T) {
	c := mustNew(t, aimd.Config{})
	s := gcra(5, 5, answer503)()
	s.countRefused = true
	if r := simulate(c, s, 2*time.Minute, 5*time.Millisecond, 0); r.goodput < 0.5 {
		t.Errorf("goodput %.3f, %.3f refused, final rate %.3g (limit 5/s)", r.goodput, r.refusedShare, r.finalRate)
	}
}

// TestAFixedWindowAnswering503: a fixed window of 600 a minute answering
// 503 once spent: the rest of each minute reads as an outage, through
// which the rate goes down slowly; at most a fifth of the requests are
// refused (99% with every 503 a cut, 54% with the rate held).
func TestAFixedWindowAnswering503(t *testing.T) {
	c := mustNew(t, aimd.Config{})
	if r := simulate(c, window(600, time.Minute, answer503, false)(), 2*time.Minute, 20*time.Millisecond, 5*time.Millisecond); r.refusedShare > 0.2 {
		t.Errorf("goodput %.3f, %.3f refused, %d sent", r.goodput, r.refusedShare, r.sent)
	}
}
