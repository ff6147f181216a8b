package budget_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"

	"github.com/forage-go/forage/budget"
)

// HostKey promises that every spelling of one origin shares one budget.
// net/http dials each pair below at one address (IDNA mapping, canonical
// IPv6), but HostKey gives each spelling a budget of its own.
func TestHostKeySpellingsOfOneOrigin(t *testing.T) {
	dialed := func(u string) string {
		var addr string
		tr := &http.Transport{DialContext: func(_ context.Context, _, a string) (net.Conn, error) {
			addr = a
			return nil, errors.New("not dialing")
		}}
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		tr.RoundTrip(req)
		return addr
	}
	for _, pair := range [][2]string{
		{"http://10.0.0.1/", "http://[::ffff:10.0.0.1]/"},        // IPv4-mapped
		{"http://[::1]:8080/", "http://[0:0:0:0:0:0:0:1]:8080/"}, // one IPv6 address
		{"http://[2001:db8::1]/", "http://[2001:0DB8:0:0::1]/"},  // one IPv6 address
	} {
		a, _ := http.NewRequest(http.MethodGet, pair[0], nil)
		b, _ := http.NewRequest(http.MethodGet, pair[1], nil)
		ka, kb := budget.HostKey(a), budget.HostKey(b)
		if ka != kb {
			t.Errorf("%s and %s: keys %q and %q (net/http dials %q and %q)", pair[0], pair[1], ka, kb, dialed(pair[0]), dialed(pair[1]))
		}
	}
}
