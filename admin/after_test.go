package admin_test

import (
	"testing"

	"github.com/forage-go/forage/admin"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
)

// TestConnectorsAfterThatIsNoKeyIsRefused: GET /connectors?after= that no
// key can follow (invalid UTF-8, a NUL) is a 400 naming "after". It was
// sent to the record store as it was: PostgreSQL refused the whole list
// ("invalid byte sequence for encoding UTF8", as records_error in a 200),
// so a page of the process's own providers came back as if the shared
// records were unreachable.
func TestConnectorsAfterThatIsNoKeyIsRefused(t *testing.T) {
	t.Parallel()
	records := checkpoint.NewMemoryStore(checkpoint.Config{})
	reg := newRegistry(t, budget.RegistryConfig{Defaults: quick(), Records: records})
	a := connectorAPI(t, reg, admin.Config{})
	for _, after := range []string{"%ff%fe", "a%00b", "%c3"} {
		a.wantBad("GET", "/connectors?after="+after, "", "after")
	}
	a.want("GET", "/connectors?after=b.example", "", 200, nil) // any other text is a place in key order
}
