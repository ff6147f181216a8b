package main

import (
	"context"
	"fmt"
	"net/http"

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
	f, _ := NewFrontier(reg, 2)                                              // at most two workers per host
	for _, u := range []string{"http://a.example/1", "http://a.example/2", "http://b.example/1", "http://b.example/2"} {
		_ = f.Add(u)
	}
	ctx := context.Background()
	for {
		u, done, ok := f.Next(ctx, nil)
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

// answer200 is a RoundTripper answering every request 200, in memory.
type answer200 struct{}

func (answer200) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Body: http.NoBody, Request: req}, nil
}
