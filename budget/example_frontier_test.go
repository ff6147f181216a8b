package budget_test

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
)

// ExampleFrontier crawls two hosts with one worker: the Frontier hands it
// a URL of whichever host is ready now, taking the hosts in turn, and
// reports false once every URL is done. Real crawls run many workers over
// the same loop.
func ExampleFrontier() {
	reg, _ := budget.NewRegistry(budget.RegistryConfig{
		Defaults: budget.Config{Adaptive: aimd.Config{Initial: 1000}}, // setup: keep the example fast
	})
	client := &http.Client{Transport: budget.NewTransport(reg, answer200{})} // setup: no network
	f, _ := budget.NewFrontier(reg, 2)                                       // at most two workers per host
	for _, u := range []string{"http://a.example/1", "http://a.example/2", "http://b.example/1", "http://b.example/2"} {
		_ = f.Add(u)
	}
	ctx := context.Background()
	for {
		u, done, ok := f.Next(ctx)
		if !ok {
			break // every URL fetched
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		resp, err := client.Do(req)
		if err == nil {
			fmt.Println(u, resp.StatusCode)
			resp.Body.Close()
		}
		done(err) // a URL the budget refused to send comes back
	}
	// Output:
	// http://a.example/1 200
	// http://b.example/1 200
	// http://a.example/2 200
	// http://b.example/2 200
}

// ExampleRegistry_ReadyAt asks when a host may next be called, booking
// nothing: a crawler's way to pick a host that is ready now.
func ExampleRegistry_ReadyAt() {
	reg, _ := budget.NewRegistry(budget.RegistryConfig{
		Defaults: budget.Config{Adaptive: aimd.Config{Min: 0.2, Initial: 0.2, Max: 0.2}}, // one request every 5 s
	})
	now := time.Now()
	fmt.Println("unknown host ready in:", reg.ReadyAt("a.example", now).Sub(now))
	client := &http.Client{Transport: budget.NewTransport(reg, answer200{})}
	resp, _ := client.Get("http://a.example/")
	resp.Body.Close()
	now = time.Now()
	wait := reg.ReadyAt("a.example", now).Sub(now)
	fmt.Println("after one call, ready in about:", wait.Round(time.Second))
	// Output:
	// unknown host ready in: 0s
	// after one call, ready in about: 5s
}

// answer200 is a RoundTripper answering every request 200, in memory.
type answer200 struct{}

func (answer200) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Body: http.NoBody, Request: req}, nil
}
