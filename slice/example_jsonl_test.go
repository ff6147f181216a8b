package slice_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
)

// Order is a record with a natural key, as a provider's API returns it.
type Order struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// A host with no store of its own keeps its records in a JSON-lines file:
// a run that replays pages (here a second run from a checkpoint store that
// forgot everything) writes nothing twice, but for a record the provider
// changed meanwhile, appended again: the last line of a key is its record,
// as ReadJSONLines reads them back.
func ExampleJSONLines() {
	dir, _ := os.MkdirTemp("", "orders") // setup
	defer os.RemoveAll(dir)
	sink, err := slice.OpenJSONLines(filepath.Join(dir, "orders.jsonl"), func(o Order) string { return o.ID })
	if err != nil {
		panic(err)
	}
	defer sink.Close()

	status := "paid" // setup: of the last order
	feed := slice.FetchFunc[Order](func(_ context.Context, s slice.Slice) (slice.Page[Order], forage.Outcome) {
		from, _ := strconv.Atoi(string(s.After)) // setup: a provider with five orders, two a page
		to := min(from+2, 5)
		var p slice.Page[Order]
		for i := from; i < to; i++ {
			o := Order{ID: "o" + strconv.Itoa(i), Status: "paid"}
			if i == 4 {
				o.Status = status
			}
			p.Records = append(p.Records, o)
		}
		p.Next, p.Last = []byte(strconv.Itoa(to)), to == 5
		return p, forage.Outcome{Status: 200}
	})
	provider, _ := budget.NewLocal("api.example.com", budget.Config{Adaptive: aimd.Config{Initial: 100}}) // setup
	for run := range 2 {
		if run == 1 {
			status = "shipped" // setup: order o4 moved on before the second run
		}
		runner, err := slice.New(slice.Config[Order]{
			Stream: "orders", Mode: checkpoint.SteadyState,
			Store: checkpoint.NewMemoryStore(checkpoint.Config{}), Provider: provider, Source: feed, Sink: sink,
		})
		if err != nil {
			panic(err)
		}
		rep, err := runner.Run(context.Background(), nil)
		fmt.Println(rep.Slices, "pages read,", sink.Len(), "orders stored", err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "orders.jsonl"))
	fmt.Print(string(data))
	orders, err := slice.ReadJSONLines(filepath.Join(dir, "orders.jsonl"), func(o Order) string { return o.ID })
	fmt.Println(orders, err) // each order's last line
	// Output:
	// 3 pages read, 5 orders stored <nil>
	// 3 pages read, 5 orders stored <nil>
	// {"id":"o0","status":"paid"}
	// {"id":"o1","status":"paid"}
	// {"id":"o2","status":"paid"}
	// {"id":"o3","status":"paid"}
	// {"id":"o4","status":"paid"}
	// {"id":"o4","status":"shipped"}
	// [{o0 paid} {o1 paid} {o2 paid} {o3 paid} {o4 shipped}] <nil>
}
