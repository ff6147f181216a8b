package admin_test

import (
	"context"
	"strings"
	"testing"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/admin"
	"github.com/forage-go/forage/budget"
)

// handEdited is a RecordStore whose row another program wrote (a
// PostgreSQL row updated by hand or by another tool): LoadRecord returns
// it as it is, as pgstore's LoadRecord does (it checks only the key).
type handEdited struct{ rec forage.ProviderRecord }

func (h handEdited) LoadRecord(_ context.Context, key string) (forage.ProviderRecord, bool, error) {
	r := h.rec
	r.Key = key
	return r, true, nil
}

func (handEdited) SaveRecord(context.Context, forage.ProviderRecord) error { return nil }

// TestAStoredWhyIsServedBoundedAndPlain: an operator's why is held to the
// name rule when set through the API (at most 1024 bytes, no control,
// bidi or zero-width character), but one read from a shared record is
// served as it is: any length on every GET /connectors, /stats, /providers
// and status page, with bidi overrides that reorder what the operator
// reads and raw ESC sequences in the HTML.
func TestAStoredWhyIsServedBoundedAndPlain(t *testing.T) {
	t.Parallel()
	why := "key revoked by ops \u202egnp.exe\u202c \x1b[2J " + strings.Repeat("w", 200_000)
	reg := newRegistry(t, budget.RegistryConfig{Defaults: quick(), Records: handEdited{forage.ProviderRecord{Status: "paused", Why: why}}})
	provider(reg, "api.example")
	a := connectorAPI(t, reg, admin.Config{})
	for _, path := range []string{"/connectors", "/stats", "/providers", "/"} {
		code, body := a.do("GET", path, "")
		if code != 200 || len(body) > 64<<10 || strings.ContainsAny(body, "\u202e\u202c\x1b") {
			t.Errorf("GET %s: %d, %d bytes, bidi or ESC served: %v; want the why cut to 1024 bytes and made plain",
				path, code, len(body), strings.ContainsAny(body, "\u202e\u202c\x1b"))
		}
	}
}
