package budget_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
)

// ExampleLimit: a provider that publishes its quota, 3 requests an hour.
// Once it is spent, a call does not block until the reset (20 minutes and
// a margin of 2 s, with the default Burst of 1): it stops at once, before any request, as
// source pressure with the time the limit admits a request again, for a
// scheduler to wait out. A wait of up to Config.MaxWait is slept through.
func ExampleLimit() {
	p, _ := budget.NewLocal("api.example.com", budget.Config{
		Limits: []budget.Limit{{Name: "3/h", Count: 3, Per: time.Hour}},
	})
	send := func(context.Context) forage.Outcome { return forage.Outcome{Status: 200} }
	start := time.Now()
	fmt.Println("first call:", p.Do(context.Background(), nil, send))

	err := p.Do(context.Background(), nil, send)
	var stop *budget.Error
	if errors.As(err, &stop) {
		fmt.Println("second call:", stop.Reason, "- source pressure:", stop.Reason.SourcePressure(),
			"- again in", stop.Until.Sub(start).Round(time.Minute), "- blocked:", time.Since(start) > time.Second)
	}
	// Output:
	// first call: <nil>
	// second call: quota - source pressure: true - again in 20m0s - blocked: false
}
