package checkpointtest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/forage-go/forage/checkpoint"
	"pgregory.net/rapid"
)

// badNames break [checkpoint.CheckName], one rule each. The first is the
// name that once broke the file store: accepted by Acquire, then refused
// when the store reopened.
var badNames = map[string]string{
	"invalid UTF-8":       "binance/BTC\xff",
	"truncated UTF-8":     "binance/\xe5\xb8",
	"surrogate half":      "a\xed\xa0\x80b",
	"NUL":                 "binance\x00BTC",
	"newline":             "binance/BTC\nforged log line",
	"tab":                 "a\tb",
	"escape":              "\x1b[31mred",
	"DEL":                 "a\x7fb",
	"C1 control":          "a\u0085b",
	"bidi override":       "binance/\u202eDSU-CTB",
	"bidi embedding":      "a\u202ab",
	"bidi isolate":        "\u2066BTC\u2069",
	"zero-width space":    "BTC\u200b-USDT",
	"zero-width joiner":   "a\u200db",
	"byte order mark":     "\ufeffbinance",
	"soft hyphen":         "BTC\u00ad",
	"line separator":      "line\u2028separator",
	"paragraph separator": "a\u2029b",
	"one byte too long":   strings.Repeat("s", checkpoint.MaxNameLen+1),
	"multibyte, too long": strings.Repeat("é", checkpoint.MaxNameLen/2) + "x",
}

// goodNames pass CheckName and must come back from every store unchanged,
// however they are stored (a hashed file name, JSON, a text column, a
// LIKE-free equality).
var goodNames = []string{
	"binance/BTC-USDT/1h",
	"币安/BTC–USDT 1h",
	"emoji 📈 and U+FFFD \ufffd",
	`quotes ' " \ % _ * ? [x]`,
	"no-break\u00a0space and ideographic\u3000space",
	" leading and trailing spaces ",
	"x",
	strings.Repeat("s", checkpoint.MaxNameLen),
	strings.Repeat("é", checkpoint.MaxNameLen/2),
}

var nameTests = []test{
	{"InvalidNamesWrapErrInvalid", func(t *testing.T, e *env) {
		for what, name := range badNames {
			if err := checkpoint.CheckName("name", name); !errors.Is(err, checkpoint.ErrInvalid) {
				t.Fatalf("CheckName(%s): %v, want ErrInvalid", what, err)
			}
			for call, err := range nameCalls(e, name) {
				wantErr(t, fmt.Sprintf("%s with a name with %s", call, what), err, checkpoint.ErrInvalid)
			}
		}
		// Nothing above changed anything.
		diff(t, "gaps", []checkpoint.Gap(nil), e.listGaps(checkpoint.GapQuery{}))
		l := e.acquire("s", "a", time.Minute)
		if l.Token != 1 {
			t.Fatalf("first grant after the refusals: token %d, want 1 (nothing was granted before)", l.Token)
		}
	}},
	{"ValidNamesRoundTrip", func(t *testing.T, e *env) {
		for i, name := range goodNames {
			if err := checkpoint.CheckName("name", name); err != nil {
				t.Fatalf("CheckName(goodNames[%d]): %v", i, err)
			}
			roundTrip(t, e, name)
		}
	}},
	{"NameRuleIsCheckName", func(t *testing.T, e *env) {
		// Property: a name the store accepts is exactly a name CheckName
		// accepts, in every method, and it comes back unchanged.
		rapid.Check(t, func(rt *rapid.T) {
			name := nameGen.Draw(rt, "name")
			if checkpoint.CheckName("name", name) == nil {
				roundTrip(rt, e, name)
				return
			}
			for call, err := range nameCalls(e, name) {
				if !errors.Is(err, checkpoint.ErrInvalid) {
					rt.Fatalf("%s(%q): %v, want ErrInvalid (CheckName refuses the name)", call, name, err)
				}
			}
		})
	}},
}

// nameGen draws names of every kind: any runes (controls included), raw
// bytes, a stream-like prefix before either, and lengths around the limit.
var nameGen = rapid.OneOf(
	rapid.String(),
	rapid.Map(rapid.SliceOfN(rapid.Byte(), 0, 12), func(b []byte) string { return string(b) }),
	rapid.Custom(func(t *rapid.T) string {
		return "binance/" + rapid.OneOf(rapid.String(), rapid.StringOf(rapid.RuneFrom(unicodeEdges))).Draw(t, "tail")
	}),
	rapid.Map(rapid.IntRange(checkpoint.MaxNameLen-2, checkpoint.MaxNameLen+2), func(n int) string { return strings.Repeat("n", n) }),
)

// unicodeEdges are runes at the edges of the rule.
var unicodeEdges = []rune{
	0, 0x1f, ' ', '~', 0x7f, 0x80, 0x9f, 0xa0, 0xad, 0x200b, 0x200f, 0x2010,
	0x2027, 0x2028, 0x2029, 0x202a, 0x202e, 0x202f, 0x2060, 0x2066, 0x2069,
	0xfeff, 0xfffd, 0x10ffff,
}

// nameCalls calls every method that takes a name with name in each name
// argument in turn (the others valid) and returns each call's error.
func nameCalls(e *env, name string) map[string]error {
	ctx := e.ctx
	key := catchUp(name)
	lease := checkpoint.Lease{Stream: name, Owner: "a", Token: 1}
	owned := checkpoint.Lease{Stream: "s", Owner: name, Token: 1}
	r := span(0, 1)
	errs := map[string]error{}
	_, errs["Load"] = e.s.Load(ctx, key)
	_, errs["Commit"] = e.s.Commit(ctx, key, []byte("x"), 0, checkpoint.Lease{})
	_, errs["Commit with a lease"] = e.s.Commit(ctx, key, []byte("x"), 0, lease)
	_, errs["Commit, lease owner"] = e.s.Commit(ctx, catchUp("s"), []byte("x"), 0, owned)
	_, errs["Acquire"] = e.s.Acquire(ctx, name, "a", time.Minute)
	_, errs["Acquire, owner"] = e.s.Acquire(ctx, "s", name, time.Minute)
	_, errs["Renew"] = e.s.Renew(ctx, lease, time.Minute)
	_, errs["Renew, owner"] = e.s.Renew(ctx, owned, time.Minute)
	errs["Release"] = e.s.Release(ctx, lease)
	errs["Release, owner"] = e.s.Release(ctx, owned)
	_, errs["AddGap"] = e.s.AddGap(ctx, checkpoint.Gap{Key: key, Reason: "r"})
	_, errs["AddGap, reason"] = e.s.AddGap(ctx, checkpoint.Gap{Key: catchUp("s"), Reason: name})
	if name != "" { // the empty GapQuery.Stream means every stream
		_, errs["ListGaps"] = e.s.ListGaps(ctx, checkpoint.GapQuery{Stream: name})
	}
	errs["AddCoverage"] = e.s.AddCoverage(ctx, name, r)
	_, errs["Coverage"] = e.s.Coverage(ctx, name)
	return errs
}

// roundTrip uses name as a stream, an owner, a reason and a series, and
// checks that every record comes back with it unchanged. It tolerates
// records left by an earlier use of the same name (the property draws
// names again): it releases what it leases and reads versions first.
func roundTrip(t rapid.TB, e *env, name string) {
	t.Helper()
	ctx := e.ctx
	l, err := e.s.Acquire(ctx, name, name, time.Minute)
	wantErr(t, fmt.Sprintf("Acquire(%q, %q)", name, name), err, nil)
	if l.Stream != name || l.Owner != name {
		t.Fatalf("Acquire(%q): lease %+v names another stream or owner", name, l)
	}
	key := steady(name)
	before, err := e.s.Load(ctx, key)
	wantErr(t, fmt.Sprintf("Load(%q)", name), err, nil)
	cursor := []byte(name)
	_, err = e.s.Commit(ctx, key, cursor, before.Version, l)
	wantErr(t, fmt.Sprintf("Commit(%q)", name), err, nil)
	l, err = e.s.Renew(ctx, l, time.Minute)
	wantErr(t, fmt.Sprintf("Renew(%q)", name), err, nil)
	cp, err := e.s.Load(ctx, key)
	wantErr(t, fmt.Sprintf("Load(%q)", name), err, nil)
	if cp.Key != key || string(cp.Cursor) != name || cp.Version != before.Version+1 {
		t.Fatalf("Load(%q) after Commit: %+v", name, cp)
	}
	g, err := e.s.AddGap(ctx, checkpoint.Gap{Key: key, Reason: name})
	wantErr(t, fmt.Sprintf("AddGap(%q)", name), err, nil)
	gaps, err := e.s.ListGaps(ctx, checkpoint.GapQuery{Stream: name})
	wantErr(t, fmt.Sprintf("ListGaps(%q)", name), err, nil)
	i := slices.IndexFunc(gaps, func(x checkpoint.Gap) bool { return x.ID == g.ID })
	if i < 0 || gaps[i].Key != key || gaps[i].Reason != name {
		t.Fatalf("ListGaps(Stream %q): %+v, want gap %d with that stream and reason", name, gaps, g.ID)
	}
	for _, x := range gaps {
		if x.Key.Stream != name {
			t.Fatalf("ListGaps(Stream %q) returned a gap of stream %q", name, x.Key.Stream)
		}
	}
	wantErr(t, fmt.Sprintf("ResolveGap(%d)", g.ID), e.s.ResolveGap(ctx, g.ID), nil)
	r := span(0, 1)
	wantErr(t, fmt.Sprintf("AddCoverage(%q)", name), e.s.AddCoverage(ctx, name, r), nil)
	cov, err := e.s.Coverage(ctx, name)
	wantErr(t, fmt.Sprintf("Coverage(%q)", name), err, nil)
	if !cov.Covers(r) {
		t.Fatalf("Coverage(%q): %v, want it to cover %v", name, cov, r)
	}
	wantErr(t, fmt.Sprintf("Release(%q)", name), e.s.Release(ctx, l), nil)
}
