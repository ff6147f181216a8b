package checkpoint

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// MaxNameLen is the longest name a store accepts, in bytes: a stream, a
// coverage series, a lease owner or a gap reason. It leaves room in a
// PostgreSQL index entry (about 2,700 bytes) and is far beyond any real
// name ("binance/BTC-USDT/1m" is 19 bytes).
const MaxNameLen = 1024

// CheckName returns nil if name is acceptable to every store as a stream,
// a series, a lease owner or a gap reason, and otherwise an error wrapping
// [ErrInvalid] that names the argument (what, e.g. "Key.Stream") and says
// why. Every store applies it, so a name one store accepts every store
// accepts, and it stays the same name after a restart. Other rules that
// show names to people (a schedule's job names) may apply it too.
//
// The rule: 1 to [MaxNameLen] bytes of valid UTF-8 with no control
// character (Unicode category Cc: U+0000–U+001F, U+007F–U+009F), no format
// character (Cf: the bidi embeddings, overrides and isolates U+202A–U+202E
// and U+2066–U+2069, the marks U+200E/U+200F, the zero-width U+200B–U+200D,
// U+2060 and U+FEFF, the soft hyphen U+00AD, and the rest of Cf), and no
// line or paragraph separator (Zl, Zp: U+2028, U+2029). Invalid UTF-8
// cannot round-trip through JSON (the file store) or a PostgreSQL text
// column, where it would be changed or refused; NUL is refused by
// PostgreSQL; a newline or an escape sequence in a name forges log lines
// and terminal output; and a format character or separator makes a name
// display as another one in logs, a terminal or the admin page ("BTC"
// followed by U+202E reads backwards; "BTC" and "BTC" with a zero-width
// space look the same). Any other character, spaces and non-ASCII letters
// included, is kept as is. A name with a zero-width joiner (some emoji
// sequences) is refused with the rest of Cf: names are identifiers, not
// prose.
func CheckName(what, name string) error {
	if why := nameProblem(name, true); why != "" {
		return fmt.Errorf("%w: %s %s (got %s)", ErrInvalid, what, why, quoteShort(name))
	}
	return nil
}

// nameProblem says what is wrong with name, or "" if nothing is. With
// strict false it applies the rule before format characters and separators
// were refused, for records written by an earlier version: a store that
// refused to open over a name it once accepted would lose everything else
// it holds.
func nameProblem(name string, strict bool) string {
	switch {
	case name == "":
		return "must not be empty"
	case len(name) > MaxNameLen:
		return fmt.Sprintf("must be at most %d bytes (is %d)", MaxNameLen, len(name))
	}
	for i, r := range name {
		switch {
		case r == utf8.RuneError && decodedError(name[i:]):
			return fmt.Sprintf("must be valid UTF-8 (invalid byte 0x%02x at byte %d)", name[i], i)
		case unicode.IsControl(r):
			return fmt.Sprintf("must not contain control characters (%U at byte %d)", r, i)
		case !strict:
		case unicode.Is(unicode.Cf, r):
			return fmt.Sprintf("must not contain format characters such as bidi controls or zero-width characters (%U at byte %d)", r, i)
		case unicode.In(r, unicode.Zl, unicode.Zp):
			return fmt.Sprintf("must not contain line or paragraph separators (%U at byte %d)", r, i)
		}
	}
	return ""
}

// decodedError reports whether s starts with an invalid UTF-8 sequence
// (rather than a literal U+FFFD, which is valid).
func decodedError(s string) bool {
	_, size := utf8.DecodeRuneInString(s)
	return size == 1
}

// quoteShort quotes s for an error message, cut to its first 64 bytes so
// an absurd name does not make an absurd message.
func quoteShort(s string) string {
	const max = 64
	if len(s) <= max {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q... (%d bytes)", s[:max], len(s))
}
