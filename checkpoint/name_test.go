package checkpoint_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/forage-go/forage/checkpoint"
	"pgregory.net/rapid"
)

// TestPropertyCheckNameRule: CheckName accepts a name exactly when it is 1
// to MaxNameLen bytes of valid UTF-8 with no control (Cc), format (Cf),
// line separator (Zl) or paragraph separator (Zp) character; a refusal
// wraps ErrInvalid. The runes drawn lean on the classes the rule names.
func TestPropertyCheckNameRule(t *testing.T) {
	t.Parallel()
	hostile := rapid.SampledFrom([]rune{
		0, '\n', 0x1b, 0x7f, 0x85, 0xad, 0x200b, 0x200d, 0x200e, 0x202a, 0x202e,
		0x2028, 0x2029, 0x2066, 0x2069, 0xfeff, 0xfff9, 0xe0001,
		' ', 0xa0, 0x3000, 'a', 'é', '币', 0xfffd, 0x1f4c8, 0x10ffff,
	})
	rapid.Check(t, func(rt *rapid.T) {
		name := rapid.OneOf(
			rapid.String(),
			rapid.StringOf(rapid.OneOf(hostile, rapid.Rune())),
			rapid.Map(rapid.SliceOfN(rapid.Byte(), 0, 8), func(b []byte) string { return string(b) }),
		).Draw(rt, "name")
		want := name != "" && len(name) <= checkpoint.MaxNameLen && utf8.ValidString(name)
		for _, r := range name {
			if unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp) {
				want = false
			}
		}
		err := checkpoint.CheckName("name", name)
		if (err == nil) != want {
			rt.Fatalf("CheckName(%+q) = %v, want accepted = %v", name, err, want)
		}
		if err != nil && !errors.Is(err, checkpoint.ErrInvalid) {
			rt.Fatalf("CheckName(%+q) = %v, want it to wrap ErrInvalid", name, err)
		}
	})
}

// TestCheckNameRefusesMisleadingCharacters: bidi overrides and isolates,
// zero-width characters and the line and paragraph separators make a name
// display as another in logs and on the admin page; each is refused with
// its code point named.
func TestCheckNameRefusesMisleadingCharacters(t *testing.T) {
	t.Parallel()
	for _, r := range []rune{0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069,
		0x200b, 0x200c, 0x200d, 0x200e, 0x200f, 0x2060, 0xfeff, 0x2028, 0x2029} {
		name := "binance/" + string(r) + "BTC"
		err := checkpoint.CheckName("stream", name)
		if !errors.Is(err, checkpoint.ErrInvalid) {
			t.Errorf("CheckName(%+q) = %v, want ErrInvalid", name, err)
			continue
		}
		if want := fmt.Sprintf("%U", r); !strings.Contains(err.Error(), want) {
			t.Errorf("CheckName(%+q) = %q, want it to name %s", name, err, want)
		}
	}
}
