package goodput_test

import (
	"fmt"
	"time"

	"github.com/forage-go/forage/internal/goodput"
)

// ExampleScenarios lists the eight standard provider policies at a true
// limit of 10 requests/s, and what each allows over a minute: the
// denominator of a collector's goodput.
func ExampleScenarios() {
	for _, sc := range goodput.Scenarios(10, 20*time.Millisecond, time.Minute) {
		fmt.Printf("%-31s allows %v\n", sc.Name, sc.Allowed(time.Minute))
	}
	// Output:
	// gcra burst 1, 429+retry-after   allows 600
	// gcra burst 10, 429+retry-after  allows 600
	// fixed window, 429+retry-after   allows 600
	// bare 429                        allows 600
	// 503                             allows 600
	// slow-down                       allows 600
	// ban after 5 violations          allows 600
	// limit halves mid-run            allows 450
}
