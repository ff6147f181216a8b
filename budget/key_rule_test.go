package budget_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"pgregory.net/rapid"
)

// TestAKeyMeetsTheNameRuleOfEveryStore: a provider is made for a key
// exactly when every store can name it ([checkpoint.CheckName]): a key the
// stores refuse could be neither saved nor steered by an operator (the
// admin API answers its pause 400), and a format character in it made it
// display as another key on the status page, in a Prometheus label and in
// a log: the host of https://\u202emoc.elgoog/ was keyed "\u202emoc.elgoog",
// which reads "google.com", whenever the registry had no record store.
func TestAKeyMeetsTheNameRuleOfEveryStore(t *testing.T) {
	t.Parallel()
	keys := rapid.OneOf(
		rapid.String(),
		rapid.StringOf(rapid.SampledFrom([]rune{'a', '.', 'ü', '\u202e', '\u200b', '\u2028', '\u00ad', '\ufeff', '\n', 0x7f})),
		rapid.Map(rapid.IntRange(checkpoint.MaxNameLen-2, checkpoint.MaxNameLen+2), func(n int) string { return strings.Repeat("a", n) }),
	)
	rapid.Check(t, func(t *rapid.T) {
		key := keys.Draw(t, "key")
		_, err := budget.NewLocal(key, fast())
		want := checkpoint.CheckName("key", key)
		if (err == nil) != (want == nil) {
			t.Fatalf("NewLocal(%q): %v; the stores' name rule says %v", key[:min(len(key), 80)], err, want)
		}
	})
	req, err := http.NewRequest(http.MethodGet, "https://\u202emoc.elgoog/", nil)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := budget.NewRegistry(budget.RegistryConfig{Defaults: fast()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Get(budget.HostKey(req)); err == nil {
		t.Errorf("Get(%q) made a provider; want the key refused", budget.HostKey(req))
	}
}
