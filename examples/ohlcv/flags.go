package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/forage-go/forage/klines"
)

// options is a parsed, validated collect command line.
type options struct {
	baseURL     string // empty: the embedded exchange
	symbols     []string
	interval    string
	step        time.Duration // the interval's length
	since       time.Time     // catch-up start, truncated to the interval
	sinceSet    bool          // -since was given (not the default)
	until       time.Time     // catch-up end (exclusive), truncated to the interval
	page        int
	store       string // a directory or a postgres:// DSN
	schema      string
	maxRequests int
	timeout     time.Duration
	maxPause    time.Duration
	follow      bool
	json        bool
	verbose     bool
	progress    bool
}

// exportOptions is a parsed export command line.
type exportOptions struct {
	store, schema, symbol, interval string
}

// usageError is a bad command line: exit status 2.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// badFlag returns a usageError naming the flag, the rule and the value.
func badFlag(name, rule string, got any) error {
	return usageError{fmt.Errorf("-%s %s (got %q)", name, rule, fmt.Sprint(got))}
}

// withoutSecrets returns raw for an error message: a URL with its password
// and query hidden, or nothing of a value that does not parse as a URL.
func withoutSecrets(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable)"
	}
	if u.RawQuery != "" {
		u.RawQuery = "..."
	}
	if u.Fragment != "" {
		u.Fragment, u.RawFragment = "...", ""
	}
	return u.Redacted()
}

// newFlagSet returns a flag set that reports errors rather than printing
// them: run prints one line.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parse runs fs over args and turns its complaints into usage errors.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	return nil
}

// parseCollect parses and validates the collect command line. Times are
// read from the clock once: "now" is fixed when the run starts.
func parseCollect(args []string) (options, error) {
	var o options
	var symbols, since, until string
	fs := newFlagSet("ohlcv")
	fs.StringVar(&o.baseURL, "base-url", "", "")
	fs.StringVar(&symbols, "symbols", "BTCUSDT", "")
	fs.StringVar(&o.interval, "interval", "1m", "")
	fs.StringVar(&since, "since", "", "")
	fs.StringVar(&until, "until", "now", "")
	fs.IntVar(&o.page, "page", 1000, "")
	fs.StringVar(&o.store, "store", "./ohlcv-data", "")
	fs.StringVar(&o.schema, "pg-schema", "forage", "")
	fs.IntVar(&o.maxRequests, "max-requests", 0, "")
	fs.DurationVar(&o.timeout, "timeout", 0, "")
	fs.DurationVar(&o.maxPause, "max-pause", time.Hour, "") // budget.Config.MaxPause's default
	fs.BoolVar(&o.follow, "follow", false, "")
	fs.BoolVar(&o.json, "json", false, "")
	fs.BoolVar(&o.verbose, "v", false, "")
	fs.BoolVar(&o.progress, "progress", true, "")
	if err := parse(fs, args); err != nil {
		return o, err
	}
	var err error
	if o.symbols, err = parseSymbols(symbols); err != nil {
		return o, err
	}
	if o.step, err = klines.Step(o.interval); err != nil {
		return o, badFlag("interval", "must be <n> followed by s, m, h, d or w, e.g. 1m", o.interval)
	}
	if o.baseURL != "" {
		if u, err := url.Parse(o.baseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
			return o, badFlag("base-url", "must be an http:// or https:// URL", withoutSecrets(o.baseURL))
		} else if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
			return o, badFlag("base-url", "must have no query or fragment (the request's path and query follow it)", withoutSecrets(o.baseURL))
		} else if p := u.Port(); p != "" {
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				return o, badFlag("base-url", "must have a port in [1, 65535]", withoutSecrets(o.baseURL))
			}
		}
		o.baseURL = strings.TrimSuffix(o.baseURL, "/")
	}
	if o.since, o.until, err = parseWindow(since, until, o.step, time.Now()); err != nil {
		return o, err
	}
	o.sinceSet = since != ""
	switch {
	case o.page < 1 || o.page > 1000:
		return o, badFlag("page", "must be in [1, 1000]", o.page)
	case o.store == "":
		return o, badFlag("store", "must name a directory or a postgres:// DSN", o.store)
	case o.maxRequests < 0:
		return o, badFlag("max-requests", "must be >= 0", o.maxRequests)
	case o.timeout < 0:
		return o, badFlag("timeout", "must be >= 0", o.timeout)
	case o.maxPause < time.Second:
		return o, badFlag("max-pause", "must be >= 1s", o.maxPause)
	}
	return o, nil
}

// parseWindow reads -since and -until against now: until is "now" (the
// last closed candle) or a time not after now; since defaults to 24h
// before until and must be before it. Both are truncated to the interval.
func parseWindow(since, until string, step time.Duration, now time.Time) (time.Time, time.Time, error) {
	end := now
	if until != "now" {
		t, err := time.Parse(time.RFC3339, until)
		if err != nil {
			return time.Time{}, time.Time{}, badFlag("until", "must be an RFC 3339 time or now", until)
		}
		if t.After(now) {
			return time.Time{}, time.Time{}, badFlag("until", "must not be in the future: candles after now are not closed", until)
		}
		end = t
	}
	end = klines.Floor(end, step) // as the exchange aligns candles: not Truncate's year 1 (3d)
	start := end.Add(-24 * time.Hour)
	if since != "" {
		t, err := time.Parse(time.RFC3339, since)
		if err != nil {
			return time.Time{}, time.Time{}, badFlag("since", "must be an RFC 3339 time, e.g. 2024-01-01T00:00:00Z", since)
		}
		start = t.UTC()
	}
	start = klines.Floor(start, step)
	if !start.Before(end) {
		return time.Time{}, time.Time{}, badFlag("since", "must be at least one interval before -until "+end.Format(time.RFC3339), since)
	}
	return start, end, nil
}

// parseSymbols splits a comma-separated list, upper-cased, and checks each
// name: 1 to 20 of A-Z, 0-9, '-', '_', '.' (it also names a file), no
// duplicates.
func parseSymbols(list string) ([]string, error) {
	var out []string
	seen := make(map[string]bool)
	for s := range strings.SplitSeq(list, ",") {
		s = strings.ToUpper(strings.TrimSpace(s))
		if !validSymbol(s) {
			return nil, badFlag("symbols", "must be a comma-separated list of symbols like BTCUSDT", list)
		}
		if seen[s] {
			return nil, badFlag("symbols", "must not repeat a symbol", list)
		}
		seen[s] = true
		out = append(out, s)
	}
	return out, nil
}

func validSymbol(s string) bool {
	if len(s) == 0 || len(s) > 20 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// parseExport parses the export command line.
func parseExport(args []string) (exportOptions, error) {
	var o exportOptions
	fs := newFlagSet("ohlcv export")
	fs.StringVar(&o.store, "store", "./ohlcv-data", "")
	fs.StringVar(&o.schema, "pg-schema", "forage", "")
	fs.StringVar(&o.symbol, "symbol", "BTCUSDT", "")
	fs.StringVar(&o.interval, "interval", "1m", "")
	if err := parse(fs, args); err != nil {
		return o, err
	}
	o.symbol = strings.ToUpper(o.symbol)
	switch {
	case !validSymbol(o.symbol):
		return o, badFlag("symbol", "must be a symbol like BTCUSDT", o.symbol)
	case o.store == "":
		return o, badFlag("store", "must name a directory or a postgres:// DSN", o.store)
	}
	if _, err := klines.Step(o.interval); err != nil {
		return o, badFlag("interval", "must be <n> followed by s, m, h, d or w, e.g. 1m", o.interval)
	}
	return o, nil
}

// isPostgres reports whether store names a PostgreSQL DSN rather than a
// directory: a postgres:// URL, or a key=value connection string such as
// "host=db dbname=market" (never taken for a directory name, which would
// write a password into the file system).
func isPostgres(store string) bool {
	if strings.HasPrefix(store, "postgres://") || strings.HasPrefix(store, "postgresql://") {
		return true
	}
	for f := range strings.FieldsSeq(store) {
		k, _, ok := strings.Cut(f, "=")
		switch {
		case !ok:
			return false
		case k == "host" || k == "hostaddr" || k == "dbname" || k == "user" || k == "password" || k == "port" || k == "sslmode":
			return true
		}
	}
	return false
}
