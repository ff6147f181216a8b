package redact

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// A Cookie header holds several cookies separated by "; ": every value is a
// secret, not only the first (the third, sid=…, went through).
func TestEveryCookieIsMasked(t *testing.T) {
	h := http.Header{"Cookie": {"session=S3CRET1; csrftoken=S3CRET2; sid=S3CRET3"}}
	for _, s := range []string{
		"Cookie: session=S3CRET1; csrftoken=S3CRET2; sid=S3CRET3",
		fmt.Sprint(h),
		fmt.Sprintf("%#v", h),
		`{"headers":{"Cookie":"session=S3CRET1; csrftoken=S3CRET2; sid=S3CRET3"}}`,
	} {
		if got := String(s); strings.Contains(got, "S3CRET") {
			t.Errorf("String(%q)\n  = %q: a cookie went through", s, got)
		}
	}
}

// An Authorization header whose scheme is not in the known list
// (Klaviyo-API-Key, SSWS, GenieKey, DeepL-Auth-Key, Key): the scheme word
// was masked and the credential after it went through.
func TestAnAuthorizationSchemeNotKnownIsMaskedWithItsCredential(t *testing.T) {
	for _, s := range []string{
		"Authorization: Klaviyo-API-Key pk_S3CRET",
		"Authorization: SSWS 00S3CRET",
		"Authorization: GenieKey S3CRET",
		"Authorization: DeepL-Auth-Key S3CRET:fx",
		"map[Authorization:[Key S3CRET]]",
	} {
		if got := String(s); strings.Contains(got, "S3CRET") {
			t.Errorf("String(%q) = %q: the credential went through", s, got)
		}
	}
}
