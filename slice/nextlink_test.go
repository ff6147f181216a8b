package slice_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/slice"
)

// linkResponse is an answer to GET base carrying each of links as a Link
// header line.
func linkResponse(base string, links ...string) *http.Response {
	u, _ := url.Parse(base)
	h := http.Header{}
	for _, l := range links {
		h.Add("Link", l)
	}
	return &http.Response{StatusCode: 200, Header: h, Request: &http.Request{Method: http.MethodGet, URL: u}}
}

// TestNextLinkReadsTheLinkHeader: the page after, as the Link header of
// RFC 8288 names it, in every way providers write it. A host's own
// `<([^>]+)>;\s*rel="next"` read none of the unquoted, multi-valued,
// capitalised, relative or late-rel links below: TokenFeed then took the
// first page for the last, and every run said caught up with the rest of
// the feed unread.
func TestNextLinkReadsTheLinkHeader(t *testing.T) {
	t.Parallel()
	const base = "https://a.example/v1/items?page=1&per_page=10"
	for _, tc := range []struct {
		name  string
		links []string
		want  string
	}{
		{"github", []string{`<https://a.example/repositories/1/issues?page=2>; rel="next", <https://a.example/repositories/1/issues?page=5>; rel="last"`}, "https://a.example/repositories/1/issues?page=2"},
		{"after last", []string{`<https://a.example/?page=5>; rel="last", <https://a.example/?page=2>; rel="next"`}, "https://a.example/?page=2"},
		{"unquoted", []string{`<https://a.example/?page=2>; rel=next`}, "https://a.example/?page=2"},
		{"several types", []string{`<https://a.example/?page=2>; rel="prev next"`}, "https://a.example/?page=2"},
		{"capitalised", []string{`<https://a.example/?page=2>; REL="Next"`}, "https://a.example/?page=2"},
		{"rel after a title", []string{`<https://a.example/?page=2>; title="the next, and; rel=prev"; rel="next"`}, "https://a.example/?page=2"},
		{"relative", []string{`</v1/items?page=2&per_page=10>; rel="next"`}, "https://a.example/v1/items?page=2&per_page=10"},
		{"relative to the page", []string{`<?page=2>; rel="next"`}, "https://a.example/v1/items?page=2"},
		{"comma in the URL", []string{`<https://a.example/?ids=1,2;x&page=2>; rel="next"`}, "https://a.example/?ids=1,2;x&page=2"},
		{"two header lines", []string{`<https://a.example/?page=1>; rel="prev"`, `<https://a.example/?page=3>; rel="next"`}, "https://a.example/?page=3"},
		{"spaces", []string{`  <https://a.example/?page=2> ;rel = "next" `}, "https://a.example/?page=2"},
		{"no next", []string{`<https://a.example/?page=1>; rel="prev", <https://a.example/?page=1>; rel="first"`}, ""},
		{"next in a title", []string{`<https://a.example/?page=2>; title="next"; rel="nextpage"`}, ""},
		{"next as a second rel", []string{`<https://a.example/?page=2>; rel="prev"; rel="next"`}, ""}, // RFC 8288 3.3: only the first rel counts
		{"none", nil, ""},
	} {
		if got, err := slice.NextLink(linkResponse(base, tc.links...)); got != tc.want || err != nil {
			t.Errorf("%s: NextLink(%q) = %q, %v; want %q", tc.name, tc.links, got, err, tc.want)
		}
	}
	if got, err := slice.NextLink(nil); got != "" || err != nil {
		t.Errorf("NextLink(nil) = %q, %v; want \"\"", got, err)
	}
}

// TestNextLinkIsFoundAmongOthers: whatever the other links of the header
// (their order, their parameters, the commas, semicolons and quotes in
// their URLs and titles), the next link is the one read, and a header
// without one reads "".
func TestNextLinkIsFoundAmongOthers(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		piece := rapid.SampledFrom([]string{"a", "1", ",", ";", "=", "&", "%2C", "x y"})
		link := func(label string, rel string) string {
			u := "https://a.example/" + label + "?q=" + strings.Join(rapid.SliceOfN(piece, 0, 4).Draw(t, label+" query"), "")
			params := []string{`rel="` + rel + `"`}
			if rapid.Bool().Draw(t, label+" title") {
				title := `title="` + strings.Join(rapid.SliceOfN(piece, 0, 4).Draw(t, label+" title text"), "") + ` rel=next"`
				params = append([]string{title}, params...)
			}
			return "<" + u + ">; " + strings.Join(params, "; ")
		}
		others := rapid.SliceOfN(rapid.SampledFrom([]string{"prev", "last", "first", "nexus", "alternate"}), 0, 4).Draw(t, "others")
		var links []string
		for i, rel := range others {
			links = append(links, link("o"+string(rune('0'+i)), rel))
		}
		hasNext := rapid.Bool().Draw(t, "has next")
		want := ""
		if hasNext {
			l := link("next", "next")
			want = l[1:strings.IndexByte(l, '>')]
			links = append(links, "") // a place for it
			at := rapid.IntRange(0, len(links)-1).Draw(t, "at")
			copy(links[at+1:], links[at:])
			links[at] = l
		}
		var header []string
		if rapid.Bool().Draw(t, "one line") {
			header = []string{strings.Join(links, ", ")}
		} else {
			header = links
		}
		if got, err := slice.NextLink(linkResponse("https://a.example/", header...)); got != want || err != nil {
			t.Fatalf("NextLink(%q) = %q, %v; want %q", header, got, err, want)
		}
	})
}

// TestNextLinkRefusesALinkThatLeavesTheOrigin: a next link to another
// host, port or scheme, or one carrying a user name or password, is a
// permanent error that names the origins and nothing of the link's path,
// query or userinfo; never "" (the feed's end, the rest unread). Followed,
// a hostile Link header took the bearer token a fetch adds to every
// request to a host of its choosing, and the whole URL, password and
// token included, was stored as the cursor.
func TestNextLinkRefusesALinkThatLeavesTheOrigin(t *testing.T) {
	t.Parallel()
	const base = "https://api.example.com/v1/items?page=1"
	for _, tc := range []struct{ name, link, names string }{
		{"another host", "<https://evil.example/v1/items?page=2&access_token=SECRET>; rel=next", "https://evil.example"},
		{"another port", "<https://api.example.com:8443/v1/items?page=2&access_token=SECRET>; rel=next", "https://api.example.com:8443"},
		{"down to http", "<http://api.example.com/v1/items?page=2&access_token=SECRET>; rel=next", "http://api.example.com"},
		{"a userinfo", "<https://user:SECRET@api.example.com/v1/items?page=2>; rel=next", "user name or password"},
		{"a userinfo elsewhere", "<http://user:SECRET@127.0.0.1:1/items?access_token=SECRET>; rel=next", "user name or password"},
		{"a relative link with another host", "<//evil.example/v1/items?page=2&access_token=SECRET>; rel=next", "https://evil.example"},
		{"no URL", "<http://[::1>; rel=next", "does not parse"},
	} {
		got, err := slice.NextLink(linkResponse(base, tc.link))
		if got != "" || err == nil {
			t.Errorf("%s: NextLink = %q, %v; want an error", tc.name, got, err)
			continue
		}
		if c := (forage.Outcome{Err: err}).Class(); c != forage.Permanent {
			t.Errorf("%s: the error is %v; want it marked Permanent", tc.name, c)
		}
		if msg := err.Error(); !strings.Contains(msg, tc.names) || strings.Contains(msg, "SECRET") || strings.Contains(msg, "page=2") {
			t.Errorf("%s: the error %q should name %q and nothing of the link's path, query or userinfo", tc.name, msg, tc.names)
		}
	}
	// The same origin, spelt in another case, is the same origin.
	if got, err := slice.NextLink(linkResponse(base, "<HTTPS://API.EXAMPLE.COM/v1/items?page=2>; rel=next")); err != nil || got == "" {
		t.Errorf("NextLink to the same origin in capitals = %q, %v; want the link", got, err)
	}
}

// TestNextLinkKeepsTheSameOriginSpeltAnotherWay: a link to the request's own
// origin is followed however it spells it: with the scheme's default port
// written out or left off, and relative to a request whose URL carries the
// user name and password the fetch itself put there (its Basic
// credential, which the link inherits from the request rather than
// carries). Refused, such a feed stopped Permanent after its first page.
func TestNextLinkKeepsTheSameOriginSpeltAnotherWay(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, base, link string }{
		{"the https port written", "https://api.example.com/v1/items?page=1", "<https://api.example.com:443/v1/items?page=2>; rel=next"},
		{"the https port left off", "https://api.example.com:443/v1/items?page=1", "<https://api.example.com/v1/items?page=2>; rel=next"},
		{"the http port written", "http://api.example.com/v1/items?page=1", "<http://api.example.com:80/v1/items?page=2>; rel=next"},
		{"an IPv6 literal, port written", "https://[2001:db8::1]/v1/items?page=1", "<https://[2001:db8::1]:443/v1/items?page=2>; rel=next"},
		{"relative, under the request's own userinfo", "https://user:pw@api.example.com/v1/items?page=1", "</v1/items?page=2>; rel=next"},
		{"query only, under the request's own userinfo", "https://user:pw@api.example.com/v1/items?page=1", "<?page=2>; rel=next"},
	} {
		got, err := slice.NextLink(linkResponse(tc.base, tc.link))
		if err != nil || got == "" {
			t.Errorf("%s: NextLink = %q, %v; want the link", tc.name, got, err)
		}
	}
	// Another port is still another origin, written default or not.
	if got, err := slice.NextLink(linkResponse("https://api.example.com:443/v1", "<https://api.example.com:8443/v1?page=2>; rel=next")); err == nil {
		t.Errorf("NextLink to another port = %q; want an error", got)
	}
	// A userinfo the link writes itself is refused, even under a request
	// that carries one.
	if got, err := slice.NextLink(linkResponse("https://user:pw@api.example.com/v1", "<https://other:SECRET@api.example.com/v1?page=2>; rel=next")); err == nil {
		t.Errorf("NextLink with a userinfo of its own = %q; want an error", got)
	}
}

// TestNextLinkKeepsNoCredentialOfTheRequest: a relative link resolved
// against a request URL that carries the fetch's user name and password
// comes back without them. The link is the feed's cursor, stored in the
// checkpoint: resolved as net/url resolves it, the fetch's password was
// stored with every page's cursor.
func TestNextLinkKeepsNoCredentialOfTheRequest(t *testing.T) {
	t.Parallel()
	for _, link := range []string{"</v1/items?page=2>; rel=next", "<?page=2>; rel=next", "<items?page=2>; rel=next"} {
		got, err := slice.NextLink(linkResponse("https://user:SECRET@api.example.com/v1/items?page=1", link))
		if err != nil || got == "" {
			t.Fatalf("NextLink(%s) = %q, %v; want the link", link, got, err)
		}
		if strings.Contains(got, "SECRET") || strings.Contains(got, "user") || strings.Contains(got, "@") {
			t.Errorf("NextLink(%s) = %q; the request's user name and password are kept in the cursor", link, got)
		}
		if !strings.HasPrefix(got, "https://api.example.com/") {
			t.Errorf("NextLink(%s) = %q; want it resolved against the request's origin", link, got)
		}
	}
}
