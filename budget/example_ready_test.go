package budget_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
)

// ExampleRegistry_ReadyAt asks when a host may next be called, booking
// nothing: a crawler's way to pick a host that is ready now.
func ExampleRegistry_ReadyAt() {
	reg, _ := budget.NewRegistry(budget.RegistryConfig{
		Defaults: budget.Config{Adaptive: aimd.Config{Min: 0.2, Initial: 0.2, Max: 0.2}}, // one request every 5 s
	})
	now := time.Now()
	fmt.Println("unknown host ready in:", reg.ReadyAt("a.example", now, 1).Sub(now))
	client := &http.Client{Transport: budget.NewTransport(reg, answer200{})}
	resp, _ := client.Get("http://a.example/")
	resp.Body.Close()
	now = time.Now()
	wait := reg.ReadyAt("a.example", now, 1).Sub(now)
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
