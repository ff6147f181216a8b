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
// accepts, and it stays the same name after a restart.
//
// The rule: 1 to [MaxNameLen] bytes of valid UTF-8 with no control
// character (U+0000–U+001F, U+007F–U+009F). Invalid UTF-8 cannot round-trip
// through JSON (the file store) or a PostgreSQL text column, where it would
// be changed or refused; NUL is refused by PostgreSQL; and a newline or an
// escape sequence in a name forges log lines and terminal output. Any
// other character, spaces and non-ASCII letters included, is kept as is.
func CheckName(what, name string) error {
	if why := nameProblem(name); why != "" {
		return fmt.Errorf("%w: %s %s (got %s)", ErrInvalid, what, why, quoteShort(name))
	}
	return nil
}

// nameProblem says what is wrong with name, or "" if nothing is.
func nameProblem(name string) string {
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
