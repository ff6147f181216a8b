package budget

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/internal/redact"
)

// Transport is an [http.RoundTripper] that sends every request through the
// [Provider] of its host, taken from a [Registry]: per-host pacing at the
// learned rate, a breaker per host, retries within the run's retry budget.
// It retries only what net/http itself would replay: a GET, HEAD, OPTIONS
// or TRACE, or a request with an Idempotency-Key or X-Idempotency-Key
// header, and only when its body can be sent again (no body, or GetBody
// set). Any other request (a POST without an idempotency key, whatever its
// body) is sent at most once, whatever the answer. A GetBody that fails
// ends the retries: the caller gets the last answer, and the provider is
// not charged with the host's failure; nor is it with a request body that
// fails to read (a source that reset), or one the caller's deadline ended
// while it was still being read. The Transport closes the bodies of the
// responses it discards, and returns the last response when it gives up,
// so the caller sees the provider's final answer (e.g. the last 429).
// A 403 whose headers name no limit is looked into: the first KiB of its
// body, put back for the caller, is read, and one that names a rate
// limit (GitHub's secondary limit) is throttling, paused a minute when it
// names no pause (handed back, it then says Retry-After: 60, so the host's
// forage.FromHTTP reads it as throttled too); a body that does not come
// within 2 s is not waited for.
//
// A success is the provider's once its body is read: until the body ends
// (read to its end, closed, or the request's context done), the request
// holds its [Config.MaxInFlight] slot and the provider has not heard of
// it. A body cut short (a provider under load that resets the connection
// mid-answer) is the provider's transient failure, as a failed request
// is: it never raises the learned rate, and the breaker counts it. Close
// every body, as net/http asks.
//
// A request waits for its host's pacing slot before it is sent. When the
// request's context has a deadline that the wait would pass, or the host
// is paused past it, the request is not sent at all: RoundTrip returns a
// *[Error] at once. Config's AttemptTimeout does not apply (the body is
// read after RoundTrip returns). Bound each request with its context
// (context.WithTimeout around client.Do, or a deadline per run), not with
// http.Client.Timeout: the client's Timeout also counts the time spent
// waiting for a slot, so under a slow provider it cancels requests that
// were never sent. A deadline that ends a request the provider had a
// second or more, and four times its usual latency, to answer counts as
// the provider's failure, for the breaker: a provider that never answers
// opens it. One that ends a request sent just before (a batch's end) is
// the caller's.
//
// One RoundTrip is one attempt per try, counted by the budget. net/http
// itself sends an idempotent request (GET, HEAD) again, once, when a
// kept-alive connection it reused fails before the answer (the server
// closed it, or reset it mid-answer); the budget does not see that second
// send. A provider that resets connections under load may so see a few
// requests more than the budget counted; a base transport with
// keep-alives off ([http.Transport.DisableKeepAlives]) sends each attempt
// exactly once, at the cost of a connection per request.
//
// The errors RoundTrip returns name the host, never the URL, but
// [http.Client.Do] wraps them in a [*net/url.Error] that holds the request's
// whole URL, query included: pass an error of client.Do through
// [forage.Redact] before logging or storing it when a URL may carry a key.
//
// The run a request belongs to is taken from its context ([WithCall]); a
// request without one is unbounded. Its weight, for a weighted [Limit],
// is taken from its context too; 1 without. Transport is safe for
// concurrent use.
//
// A request is charged to the provider its host names ([HostKey]), or the
// one Key names: a provider that limits each resource apart (GitHub's
// search apart from its core API, Slack each method, Discord each route)
// is keyed by resource, so one resource's spent quota does not pause the
// others, nor its headers pace them. The key is the request URL's: a
// request sent to an address with another Host header is charged to the
// address.
//
// A request sent from inside an attempt of the provider it is keyed to (the
// Fetch of a slice Source whose client is over this Transport: its runner
// calls Fetch inside [Provider.Do]) is that attempt: it is sent once, as it
// is, admitted, paced, counted and retried by the Do it is in, its
// [WithCall] options ignored. (A Do of its own inside it took a second
// pacing slot and unit of every known limit, and waited for the bulkhead
// slot its own outer call held.) A second request of the same attempt is
// paced, booked against the known limits and counted in the run ctx
// carries ([WithCall]) as any other, within the attempt's bulkhead slot
// (waiting for one of its own, it waited for good under MaxInFlight 1),
// and sent once: the Do around it retries the attempt. A request that a
// budget refuses before sending it (a known limit spent, a pause, an open
// breaker) stops the Do around it with that refusal and its Until, not as
// a failure of the provider. A request inside an attempt of another
// provider (the Transport keys by host, the stream's provider is "myapi")
// is paced, limited and counted by its own provider but sent once, and
// not counted in the run again: the Do around it retries the attempt
// (retried in both, an outage was sent 7 requests under a request cap of
// 4); a Warn says so once per provider.
//
// The zero Transport sends through [http.DefaultTransport] with a
// Registry of its own; [NewTransport] names both.
type Transport struct {
	// Key, if set, returns the provider key of a request, instead of
	// [HostKey]. Set it before the Transport's first request. An empty
	// key is an error, and the request is not sent.
	Key func(*http.Request) string

	reg     *Registry
	base    http.RoundTripper
	own     *Registry // a zero Transport's, made by ownOnce
	ownOnce sync.Once
}

// NewTransport returns a Transport over base (nil means
// [http.DefaultTransport]) whose providers come from reg (nil means a
// Registry of its own, with the default [RegistryConfig]).
func NewTransport(reg *Registry, base http.RoundTripper) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	if reg == nil {
		reg, _ = NewRegistry(RegistryConfig{}) // the zero config is valid
	}
	reg.transported.Store(true)
	return &Transport{reg: reg, base: base}
}

type runKey struct{}

type callKey struct{}

// attemptKey marks the context of an attempt Provider.Do runs with an
// *attemptMark. The first request sent with it through a Transport that
// keys it to the mark's provider is that attempt (a slice Source's Fetch,
// which its runner calls inside Provider.Do, with a Transport client): it
// is sent as it is, already admitted, paced and counted by the Do it is
// in. Run through a Do of its own, it took two pacing slots and two units
// of every known limit, was counted twice, and waited for a bulkhead slot
// its own outer call held. A second request of the same attempt (a Fetch
// that asks twice) goes through a Do of its own, as any other call: sent
// as the attempt too, it would be counted by no known limit.
type attemptKey struct{}

// attemptMark is an attempt's mark: its provider, and whether a request
// was sent as the attempt.
type attemptMark struct {
	p    *local
	sent atomic.Bool
	// slot is the attempt's bulkhead slot, which one request of the
	// attempt at a time may borrow when every slot is taken (see
	// CallOption.borrow); made by the first request that needs it, so an
	// attempt that sends none allocates nothing for it.
	slot atomic.Pointer[chan struct{}]
}

// borrowSlot returns the attempt's slot to borrow (see slot).
func (m *attemptMark) borrowSlot() chan struct{} {
	if c := m.slot.Load(); c != nil {
		return *c
	}
	c := make(chan struct{}, 1)
	if m.slot.CompareAndSwap(nil, &c) {
		return c
	}
	return *m.slot.Load()
}

// localOf returns the *local behind p, or nil.
func localOf(p Provider) *local {
	switch q := p.(type) {
	case *entry:
		return q.p
	case *local:
		return q
	}
	return nil
}

// inAttemptOf reports whether ctx is the context of an attempt of p none
// of whose requests was sent as the attempt yet, and if so takes it: the
// request is the attempt.
func inAttemptOf(ctx context.Context, p Provider) bool {
	m, _ := ctx.Value(attemptKey{}).(*attemptMark)
	if m == nil {
		return false
	}
	return localOf(p) == m.p && m.sent.CompareAndSwap(false, true)
}

// WithCall returns a context carrying, for the requests a [Transport] sends
// with it, what [Provider.Do] takes beside the attempt: the run whose
// budget counts the requests' attempts (nil keeps the run ctx carries, if
// any; a request with none is unbounded), and call options: a
// [CallOption] Weight for an endpoint that costs more of a weighted
// [Limit] (a Binance endpoint of weight 10), NoRetry for one not to be
// sent twice. The options add to what the Transport sets itself and to
// what ctx carried already (of several weights, the heaviest counts).
func WithCall(ctx context.Context, run *Run, opts ...CallOption) context.Context {
	if run != nil {
		ctx = context.WithValue(ctx, runKey{}, run)
	}
	if len(opts) > 0 {
		ctx = context.WithValue(ctx, callKey{}, append(callsFrom(ctx), opts...))
	}
	return ctx
}

// callsFrom returns the call options ctx carries (see [WithCall]).
func callsFrom(ctx context.Context) []CallOption {
	o, _ := ctx.Value(callKey{}).([]CallOption)
	return o[:len(o):len(o)] // appending copies: a derived context never writes into its parent's
}

// runFrom returns the run carried by ctx, or nil (unbounded).
func runFrom(ctx context.Context) *Run {
	r, _ := ctx.Value(runKey{}).(*Run)
	return r
}

// HostKey returns the provider key of a request URL's host: lower case,
// without a fully qualified name's trailing dot, an IP address in its
// canonical form ("[0:0::1]" is "[::1]", "::ffff:10.0.0.1" is
// "10.0.0.1"), the port without leading zeros and without the scheme's
// default port. Every spelling of one origin ("Example.com.", ":0443",
// ":443") shares one budget: a crawler fed links written several ways
// must not send a server several times its pace. A name that is not ASCII
// is keyed as written: net/http sends "bücher.example" to its punycode
// form "xn--bcher-kva.example", which is keyed apart (give such links one
// spelling, or set [Transport.Key]).
func HostKey(req *http.Request) string {
	host, port := strings.TrimSuffix(strings.ToLower(req.URL.Hostname()), "."), req.URL.Port()
	if a, err := netip.ParseAddr(host); err == nil {
		host = a.Unmap().String()
	}
	if n, err := strconv.ParseUint(port, 10, 16); err == nil {
		port = strconv.FormatUint(n, 10)
	}
	if (port == "80" && req.URL.Scheme == "http") || (port == "443" && req.URL.Scheme == "https") {
		port = ""
	}
	if port == "" {
		if strings.Contains(host, ":") {
			return "[" + host + "]" // IPv6, bracketed as in a URL
		}
		return host
	}
	return net.JoinHostPort(host, port)
}

// RoundTrip sends req through its host's provider. It returns the last
// response whenever one was received, even when the call stopped (a final
// 429 or 503), and an error only when no response came back; that error is
// a *[Error] when the budget stopped the call. The attempts' errors are
// redacted as [forage.FromHTTP] redacts them, so the *Error names no credential of
// the request's URL (the http.Client still wraps it in a *url.Error with the
// whole URL: pass its answer through forage.FromHTTP before storing or logging it).
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil {
		closeBody(req)
		return nil, errors.New("budget: transport: nil Request.URL")
	}
	key := ""
	if t.Key != nil {
		key = t.Key(req)
	} else {
		key = HostKey(req)
	}
	if key == "" {
		// Said in the host's terms: the Registry's "key must be
		// non-empty (got "")" named a key the host never wrote, for a
		// relative link passed as it is.
		closeBody(req)
		if t.Key != nil {
			return nil, fmt.Errorf("budget: transport: Transport.Key returned no key for a request to %q", HostKey(req))
		}
		return nil, fmt.Errorf("budget: transport: the request URL %q names no host (a relative URL: resolve it against the page it came from)", redact.URL(req.URL.String()))
	}
	p, err := t.registry().Get(key)
	if err != nil {
		closeBody(req) // a RoundTripper closes the body, even on errors
		return nil, err
	}
	if inAttemptOf(req.Context(), p) {
		return t.transport().RoundTrip(req) // the attempt of the Do it is in
	}
	run := runFrom(req.Context())
	nested := false
	var borrow chan struct{}
	if m, _ := req.Context().Value(attemptKey{}).(*attemptMark); m != nil && m.p == localOf(p) {
		// A second request inside an attempt of this provider (an
		// attempt that fetches a page, then its details): paced, limited
		// and counted in the run ctx carries as a request of its own, in
		// a slot of its own or, every slot taken, the attempt's (waiting
		// for a slot of its own, it waited for good under MaxInFlight 1),
		// one such request at a time; and sent once: the Do around it
		// retries the attempt.
		nested, borrow = true, m.borrowSlot()
	} else if m != nil {
		// Inside an attempt of another provider (a slice Source keyed
		// "myapi" whose client's Transport keys by host): paced, limited
		// and counted by this provider, but sent once. The attempt it is
		// in is retried, and counted in the run, by the Do around it:
		// retried here too, each of its attempts became up to a retry
		// budget of requests (7 sent under a request cap of 4).
		run, nested = nil, true
		if m.p.warnedNested.CompareAndSwap(false, true) {
			m.p.event(slog.LevelWarn, "budget: a request inside an attempt of this provider was keyed to another by a Transport: paced by both, sent once; key the Transport as this provider (Transport.Key) to pace and count it once",
				slog.String("transport_key", key))
		}
	}
	replayable := replayable(req)
	var last *http.Response
	tries := 0
	attempt := func(ctx context.Context) forage.Outcome {
		r := req.WithContext(ctx)
		if tries > 0 && req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				// The host's body cannot be sent again: not the provider's
				// answer (Canceled tells it nothing), and the caller gets
				// the provider's last one, which stays undiscarded.
				return forage.Outcome{Err: forage.Mark(fmt.Errorf("budget: transport: the request body cannot be sent again: %w", err), forage.Canceled)}
			}
			r.Body = body
		}
		if last != nil { // the previous answer is being retried: discard it
			discard(last)
			last = nil
		}
		var body *sentBody
		if r.Body != nil && r.Body != http.NoBody {
			body = &sentBody{ReadCloser: r.Body}
			r.Body = body
		}
		tries++
		resp, err := t.transport().RoundTrip(r)
		last = resp
		if err != nil && body != nil {
			if berr := body.failed(); berr != nil {
				// The host's body failed to read (a source that reset,
				// a query that failed), not the provider: it tells the
				// provider nothing (net/http wraps it in a network
				// error, which read as the provider's failure, and nine
				// opened a healthy provider's breaker).
				return forage.Outcome{Err: forage.Mark(fmt.Errorf("budget: transport: reading the request body: %w", berr), forage.Canceled)}
			}
			if !body.sent() && ctx.Err() != nil {
				// The caller's deadline ended the request while its body
				// was still being read: the provider never had the whole
				// request, so it did not fail to answer (see once).
				err = &unsentError{err}
			}
		}
		out := forage.FromHTTP(resp, err)
		if err == nil && resp.StatusCode == http.StatusForbidden && out.Class() == forage.Permanent && bodyNamesRateLimit(ctx, resp) {
			out.Err = forage.Mark(errors.New("budget: transport: HTTP 403 whose body names a rate limit"), forage.Throttled)
			if out.RetryAfter <= 0 {
				out.RetryAfter = bodyLimitPause
				// Handed back (a call that cannot wait out the pause, or
				// sent once), the 403 is read by the host too, with
				// forage.FromHTTP: its headers name no limit, and it read
				// as a permanent failure. A Retry-After says what it is.
				if resp.Header == nil {
					resp.Header = http.Header{}
				}
				resp.Header.Set("Retry-After", strconv.Itoa(int(bodyLimitPause/time.Second)))
			}
		}
		return out
	}
	// The response body is read after RoundTrip returns, so the attempt's
	// context must outlive the attempt: no per-attempt timeout here (the
	// http.Client's Timeout bounds the exchange, body included).
	settle := &settler{}
	opts := append([]CallOption{{keepContext: true, settle: settle}}, callsFrom(req.Context())...)
	if !replayable || nested {
		opts = append(opts, CallOption{NoRetry: true, borrow: borrow})
	}
	ended := false
	defer func() {
		if !ended && last != nil {
			// A host's hook (Config.Classify, Config.Ban) panicked: the
			// answer in hand goes back to its connection on the way up
			// (one connection leaked per panic).
			discard(last)
		}
	}()
	err = p.Do(req.Context(), run, attempt, opts...)
	ended = true
	if last != nil {
		settleOnBody(req.Context(), last, settle)
		return last, nil
	}
	settle.run(nil) // a success with no response to return: none is due
	if tries == 0 {
		closeBody(req) // a RoundTripper closes the body, even unsent
	}
	if err == nil {
		err = errors.New("budget: transport: attempt returned no response")
	}
	return nil, err
}

// rateLimitPeek is how much of a 403's body bodyNamesRateLimit reads.
const rateLimitPeek = 1 << 10

// bodyLimitPause is the pause of a 403 that names a rate limit in its body
// alone, with no Retry-After: GitHub asks for a minute at least before a
// request refused by a secondary rate limit is sent again.
const bodyLimitPause = time.Minute

// rateLimitWords are what a 403's body says when it is a refusal for rate
// (GitHub's "You have exceeded a secondary rate limit", its older "abuse
// detection mechanism", Google's "rateLimitExceeded"), in lower case.
var rateLimitWords = [...]string{"rate limit", "ratelimit", "rate-limit", "rate_limit", "abuse detection"}

// rateLimitPeekWait is how long bodyNamesRateLimit waits for a 403's
// first KiB: a body that does not come by then (a tarpit's, a stalled
// connection's) is left to the caller, and the 403 is what its headers
// say. (Waited for, it held RoundTrip, and a host with no deadline never
// got the 403 to close.)
const rateLimitPeekWait = 2 * time.Second

// bodyNamesRateLimit reads the first rateLimitPeek bytes of a 403's body,
// puts them back for the caller, and reports whether they name a rate
// limit. A 403 whose headers say nothing of a limit is a permission
// refused, or a limit said in the body alone: GitHub's secondary limits
// come so, and read as permanent failures, each sent again at once (240
// refused requests in the minute GitHub asked to be left alone, not one).
// The words are the provider's own; a permission refused rarely names a
// rate limit, and costs a pause and the retries of one call when it does.
// It waits rateLimitPeekWait at most, or until ctx ends, and reports
// false then; the read goes on for the caller's first Read, and the
// caller's Close ends it.
func bodyNamesRateLimit(ctx context.Context, resp *http.Response) bool {
	if resp.Body == nil || resp.Body == http.NoBody {
		return false
	}
	b := &peekedBody{body: resp.Body, done: make(chan struct{})}
	resp.Body = b
	go b.peek()
	wait := time.NewTimer(rateLimitPeekWait)
	defer wait.Stop()
	select {
	case <-b.done:
	case <-wait.C:
		return false
	case <-ctx.Done():
		return false
	}
	low := bytes.ToLower(b.buf)
	for _, w := range rateLimitWords {
		if bytes.Contains(low, []byte(w)) {
			return true
		}
	}
	return false
}

// peekedBody is a response body whose first bytes are read on a goroutine
// of their own (peek), and are read again first. Like any body, it is
// read by one goroutine at a time.
type peekedBody struct {
	body io.ReadCloser
	done chan struct{} // closed once buf is read
	buf  []byte        // the first bytes, set before done is closed
	off  int           // how much of buf the caller has read
}

// peek reads the first rateLimitPeek bytes of the body into buf. A read
// error comes again to the caller, after the bytes read.
func (b *peekedBody) peek() {
	defer close(b.done)
	buf := make([]byte, rateLimitPeek)
	n, _ := io.ReadFull(b.body, buf)
	b.buf = buf[:n]
}

// Read reads the peeked bytes, once they are in, then the rest.
func (b *peekedBody) Read(p []byte) (int, error) {
	<-b.done
	if b.off < len(b.buf) {
		n := copy(p, b.buf[b.off:])
		b.off += n
		return n, nil
	}
	return b.body.Read(p)
}

// Close closes the body, which ends a peek still waiting for it.
func (b *peekedBody) Close() error { return b.body.Close() }

// registry returns t's Registry: a zero Transport's own, made once.
func (t *Transport) registry() *Registry {
	if t.reg != nil {
		return t.reg
	}
	t.ownOnce.Do(func() {
		t.own, _ = NewRegistry(RegistryConfig{}) // the zero config is valid
		t.own.transported.Store(true)
	})
	return t.own
}

// transport returns the base transport: http.DefaultTransport for a zero
// Transport.
func (t *Transport) transport() http.RoundTripper {
	if t.base == nil {
		return http.DefaultTransport
	}
	return t.base
}

// CloseIdleConnections closes the idle connections of the base transport,
// if it has any to close, as [http.Client.CloseIdleConnections] expects of
// a transport.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.transport().(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// closeBody closes req's body, if it has one.
func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// replayable reports whether req may be sent again after an answer: the
// rule of net/http's own retries. Its body can be sent again (none, or
// GetBody), and its method is idempotent or it carries an idempotency key.
func replayable(req *http.Request) bool {
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return false
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, key := req.Header["Idempotency-Key"]
	_, xkey := req.Header["X-Idempotency-Key"]
	return key || xkey
}

// discard closes a response body that is being retried, unread: draining
// it first, for the connection's reuse, waits on the provider, and one that
// stalled mid-body held the retry (and its in-flight slot and breaker
// ticket) until the caller's deadline, or for good. An unread body's
// connection is closed, not reused.
func discard(resp *http.Response) {
	if resp.Body != nil {
		_ = resp.Body.Close()
	}
}

// sentBody records how reading a request's body went, for the Transport to
// tell the host's failure from the provider's. net/http reads the body on
// a goroutine of its own.
type sentBody struct {
	io.ReadCloser
	mu  sync.Mutex
	err error // the first read error other than io.EOF
	eof bool  // read to its end
}

// Read reads from the body, noting an error and the end.
func (b *sentBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.mu.Lock()
		if err == io.EOF {
			b.eof = true
		} else if b.err == nil {
			b.err = err
		}
		b.mu.Unlock()
	}
	return n, err
}

// failed returns the body's read error, if reading it failed.
func (b *sentBody) failed() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// sent reports whether the body was read to its end.
func (b *sentBody) sent() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.eof
}

// unsentError is an attempt's error when the caller's deadline ended it
// before its body was all read: the provider had no whole request to
// answer, so once does not count it as the provider's failure to answer.
type unsentError struct{ err error }

func (e *unsentError) Error() string { return e.err.Error() }
func (e *unsentError) Unwrap() error { return e.err }

// settler holds what settles a success through the Transport once its
// body is read (see once): at most once, whoever calls first.
type settler struct {
	mu   sync.Mutex
	f    func(bodyErr error)
	done bool
}

// set arms s with f.
func (s *settler) set(f func(bodyErr error)) {
	s.mu.Lock()
	s.f = f
	s.mu.Unlock()
}

// run settles with bodyErr (nil: the body was read to its end, or the
// caller closed it; a *gaveUpError: the request's context ended first),
// if s is armed and not settled yet. A call that finds the settling under
// way returns once it is done: a body's Read that ended at the deadline
// returned to the caller while the deadline's own settling was still
// counting the failure, and the caller's next look at the provider missed
// it.
func (s *settler) run(bodyErr error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done || s.f == nil {
		return
	}
	s.done = true
	s.f(bodyErr)
}

// settleOnBody settles s when resp's body ends: read to its end, failed,
// closed, or the request's context done (a body the caller never closes
// holds no slot past it). A response with no body to read settles at
// once, and so does a 101 (its body is the connection, and must stay an
// io.ReadWriteCloser).
func settleOnBody(ctx context.Context, resp *http.Response, s *settler) {
	s.mu.Lock()
	armed := s.f != nil
	s.mu.Unlock()
	if !armed {
		return
	}
	if resp.Body == nil || resp.Body == http.NoBody || resp.StatusCode == http.StatusSwitchingProtocols {
		s.run(nil)
		return
	}
	b := &settledBody{ReadCloser: resp.Body, s: s, ctx: ctx}
	b.stop = context.AfterFunc(ctx, func() {
		if b.reading.Load() {
			s.run(&gaveUpError{ctx.Err()}) // the caller was reading the body, and waited for the rest
			return
		}
		s.run(nil) // a body the caller left unread, and unclosed: the provider answered
	})
	resp.Body = b
}

// settledBody is a response body that settles its success when it ends:
// a read error that is not the caller's is the provider's failure.
type settledBody struct {
	io.ReadCloser
	s       *settler
	stop    func() bool
	ctx     context.Context
	reading atomic.Bool // a Read has begun: the caller is reading the body, and waits for the rest
}

// Read reads from the body; its end settles the success, or the failure.
func (b *settledBody) Read(p []byte) (int, error) {
	// Set for good, not only while a Read runs: a deadline that came as
	// one Read returned a byte, before the next began, read as a body the
	// caller had left unread, a success (a test failed 1 run in 10).
	b.reading.Store(true)
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == nil:
	case err == io.EOF:
		b.end(nil) // read whole
	case b.ctx.Err() != nil:
		b.end(&gaveUpError{b.ctx.Err()}) // the caller's cancel, or its deadline in the body (see settleLater)
	default:
		b.end(err) // cut short: the provider's
	}
	return n, err
}

// gaveUpError settles a body whose request's context ended before the body
// did: a cancel is the caller's (a success: the provider answered), but a
// deadline that came long after the send, with the body still coming, is a
// provider that stalled its answer (see settleLater).
type gaveUpError struct{ err error }

func (e *gaveUpError) Error() string { return e.err.Error() }
func (e *gaveUpError) Unwrap() error { return e.err }

// Close closes the body; a body closed before its end settles as read.
func (b *settledBody) Close() error {
	err := b.ReadCloser.Close()
	b.end(nil)
	return err
}

// end settles once.
func (b *settledBody) end(err error) {
	b.stop()
	b.s.run(err)
}
