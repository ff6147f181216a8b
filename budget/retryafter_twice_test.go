package budget_test

import (
	"fmt"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/forage-go/forage/budget"
)

// A 429 whose Retry-After came twice (an application and its proxy each set
// one), as two field lines or coalesced into one by an intermediary: the
// provider asked for two minutes and was sent the request again within
// seconds (the merged value did not parse; of two lines, the first was
// taken).
func TestARetryAfterGivenTwiceIsHonouredWhole(t *testing.T) {
	for _, ra := range [][]string{{"1", "120"}, {"120, 120"}} {
		t.Run(fmt.Sprint(ra), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &scripted{codes: []int{429, 200}, headers: http.Header{"Retry-After": ra}}
				cfg := fast()
				reg := newRegistry(t, budget.RegistryConfig{Defaults: cfg})
				c := &http.Client{Transport: budget.NewTransport(reg, base)}
				t0 := time.Now()
				resp, err := c.Get("http://api.example.com/v1/x")
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				d := time.Since(t0)
				t.Logf("%q: %d sends, %v", ra, len(base.seen), d)
				if len(base.seen) > 1 && d < 120*time.Second {
					t.Errorf("Retry-After %q: sent again after %v, want at least 2m", ra, d)
				}
			})
		})
	}
}
