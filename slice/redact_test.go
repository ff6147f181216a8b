package slice_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/aimd"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/slice"
)

// failingExchange is the examples' exchange whose every request fails with
// err.
type failingExchange struct {
	exchange
	err error
}

func (e failingExchange) Fetch(context.Context, slice.Slice) (slice.Page[candle], forage.Outcome) {
	return slice.Page[candle]{}, forage.Outcome{Err: e.err}
}

// TestRunLogHoldsNoSecret: a run that fails with net/http's *url.Error
// (whose message holds the signed request's URL) logs the failure with the
// URL's query values redacted, whether the host's source returned the
// error as it came or through forage.FromHTTP (which also keeps it out of
// the error Run returns).
func TestRunLogHoldsNoSecret(t *testing.T) {
	t.Parallel()
	const signed = "https://api.example.com/api/v3/klines?symbol=BTCUSDT&apikey=K3Y-s3cr3t&signature=S1G-s3cr3t"
	raw := &url.Error{Op: "Get", URL: signed, Err: errors.New("tls: handshake failure")}
	for name, err := range map[string]error{"raw": raw, "FromHTTP": forage.FromHTTP(nil, raw).Err} {
		provider, perr := budget.NewLocal("exchange", budget.Config{Burst: 100, Adaptive: aimd.Config{Initial: 1000, Max: 1000}})
		if perr != nil {
			t.Fatal(perr)
		}
		var logs bytes.Buffer
		r, nerr := slice.New(slice.Config[candle]{
			Stream: "exchange/BTC-USDT/1m", Mode: checkpoint.SteadyState,
			Store:    checkpoint.NewMemoryStore(checkpoint.Config{}),
			Provider: provider,
			Source:   failingExchange{exchange{start: at(12, 0), now: at(12, 35)}, err},
			Sink:     slice.SinkFunc[candle](func(context.Context, slice.Page[candle]) error { return nil }),
			Logger:   slog.New(slog.NewJSONHandler(&logs, nil)),
		})
		if nerr != nil {
			t.Fatal(nerr)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, rerr := r.Run(ctx, nil)
		cancel()
		if rerr == nil {
			t.Fatalf("%s: the run succeeded", name)
		}
		if out := logs.String(); !strings.Contains(out, "run failed") || strings.Contains(out, "s3cr3t") ||
			!strings.Contains(out, "klines?symbol=BTCUSDT&apikey=REDACTED") {
			t.Errorf("%s: log %s: want the failure with its URL redacted", name, out)
		}
		if name == "FromHTTP" && strings.Contains(rerr.Error(), "s3cr3t") {
			t.Errorf("%s: Run returned %q", name, rerr)
		}
	}
}
