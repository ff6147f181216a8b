package admin_test

import (
	"context"
	"strings"
	"testing"

	"github.com/forage-go/forage/schedule"
)

// TestSecretHeadersNamedKeyAreRedacted: a last error that quotes a request's
// headers (a provider echoing them, httputil.DumpRequest, an http.Header
// printed with %v) is served with the value of secret headers whose name
// ends in "key" but not "apikey": Azure API Management and Functions keys,
// Cloudflare's global key, Datadog's application key, Alpaca's key id,
// AWS's access key id.
func TestSecretHeadersNamedKeyAreRedacted(t *testing.T) {
	t.Parallel()
	store := schedule.NewMemoryJobStore()
	ctx := context.Background()
	errs := []string{
		"HTTP 401: Ocp-Apim-Subscription-Key: S3CRET1 is invalid",
		"map[X-Functions-Key:[S3CRET2]]",
		"X-Auth-Key: S3CRET3",
		"DD-APPLICATION-KEY: S3CRET4",
		"APCA-API-KEY-ID: S3CRET5",
		`{"AccessKeyId": "S3CRET6"}`,
		`Authorization: OAuth oauth_consumer_key="S3CRET7", oauth_signature="x"`,
	}
	for i, e := range errs {
		j, err := store.Upsert(ctx, schedule.Job{Provider: "p", Kind: schedule.KindBackfill, Stream: string(rune('a' + i)), State: schedule.StateIdle})
		if err != nil {
			t.Fatal(err)
		}
		j.State, j.Stats = schedule.StateFailed, schedule.Stats{Runs: 1, Failures: 1, LastError: e}
		if _, err := store.Update(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	s, err := schedule.New(schedule.Config{}, store, idle)
	if err != nil {
		t.Fatal(err)
	}
	h := handler(t, s)
	for _, path := range []string{"/jobs", "/"} {
		body := send(h, localRequest("GET", path, nil)).Body.String()
		for i := range errs {
			if secret := "S3CRET" + string(rune('1'+i)); strings.Contains(body, secret) {
				t.Errorf("GET %s serves %s from the last error %q", path, secret, errs[i])
			}
		}
	}
}
