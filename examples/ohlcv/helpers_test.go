package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/forage-go/forage/providertest"
)

// inMemory serves the embedded exchange in memory: no sockets, so a whole
// run fits in a testing/synctest bubble and its minutes pass instantly.
var inMemory = env{serve: func(srv *providertest.Server) (string, *http.Client, func(), error) {
	return "http://sim", srv.Client(), func() {}, nil
}}

// tb is what the helpers need of a test: a *testing.T or a *rapid.T.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

// result is one command's exit status and output.
type result struct {
	code           int
	stdout, stderr string
}

// cli runs the command in process against the in-memory exchange.
func cli(ctx context.Context, args ...string) result {
	var out, errOut bytes.Buffer
	code := runEnv(ctx, inMemory, args, &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

// collectOK runs a collect command with -json that must exit 0, and
// returns its summary.
func collectOK(t tb, args ...string) summary {
	t.Helper()
	r := cli(context.Background(), append(args, "-json")...)
	if r.code != 0 {
		t.Fatalf("ohlcv %s: exit %d, stderr %q", strings.Join(args, " "), r.code, r.stderr)
	}
	return decodeSummary(t, r.stdout)
}

// decodeSummary reads the one JSON line of -json.
func decodeSummary(t tb, out string) summary {
	t.Helper()
	if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
		t.Fatalf("stdout is not one line: %q", out)
	}
	var s summary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("decode summary %q: %v", out, err)
	}
	return s
}

// exportOf runs the export command and returns its lines.
func exportOf(t tb, args ...string) []string {
	t.Helper()
	r := cli(context.Background(), append([]string{"export"}, args...)...)
	if r.code != 0 {
		t.Fatalf("ohlcv export %s: exit %d, stderr %q", strings.Join(args, " "), r.code, r.stderr)
	}
	return strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
}

// checkSeries fails unless lines are the candles opening at from, from+step,
// ..., before to: ascending, no duplicate, no hole, six fields each.
func checkSeries(t tb, lines []string, from, to time.Time, step time.Duration) {
	t.Helper()
	want := int(to.Sub(from) / step)
	if len(lines) != want {
		t.Fatalf("%d candles exported, want %d (%s to %s)", len(lines), want, from, to)
	}
	for i, line := range lines {
		fields := strings.Split(line, ",")
		ms := from.Add(time.Duration(i) * step).UnixMilli()
		if len(fields) != 6 || fields[0] != strconv.FormatInt(ms, 10) {
			t.Fatalf("line %d = %q, want open time %d: out of order, duplicate or hole", i, line, ms)
		}
	}
}

// isOneLine fails unless s is exactly one line starting with "ohlcv: " and
// containing want.
func isOneLine(t tb, s, want string) {
	t.Helper()
	if strings.Count(s, "\n") != 1 || !strings.HasSuffix(s, "\n") || !strings.HasPrefix(s, "ohlcv: ") || !strings.Contains(s, want) {
		t.Fatalf("stderr = %q, want one line \"ohlcv: ...%s...\"", s, want)
	}
}

// maxKlineLimit is the most candles one klines answer holds, as Binance
// caps them (see providertest.Query.Limit).
const maxKlineLimit = 1000

// plainCursor is the plain klines cursor of the candle at t: its open
// time in Unix milliseconds (see the klines package doc).
func plainCursor(t time.Time) []byte { return strconv.AppendInt(nil, t.UnixMilli(), 10) }
