package slice

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/forage-go/forage/internal/redact"
)

// TestACutCursorKeepsItsSecretMasked: a cursor cut to maxCursorText bytes
// (cursorText) shows no more of a credential in its URL than the whole
// cursor did, wherever the cut falls: in the key's name, in its value, or
// after it.
func TestACutCursorKeepsItsSecretMasked(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3tTOKENvalue0123456789"
	rapid.Check(t, func(t *rapid.T) {
		pad := rapid.IntRange(0, 2*maxCursorText).Draw(t, "path length")
		name := rapid.SampledFrom([]string{"access_token", "api_key", "token", "signature", "key"}).Draw(t, "name")
		u := "https://api.example.com/" + strings.Repeat("p", pad) + "?page=2&" + name + "=" + secret + "&per_page=100"
		c, _ := json.Marshal(map[string]any{"tf": 1, "t": u})
		for _, got := range []string{shown(c), redact.String(fmt.Sprintf("cursor %q: failed", cursorText(c)))} {
			for i := 6; i <= len(secret); i++ {
				if strings.Contains(got, secret[:i]) {
					t.Fatalf("cut cursor of %d bytes shows %q of the secret: %s", len(c), secret[:i], got)
				}
			}
		}
	})
}
