package budget

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/internal/redact"
)

// Frontier is a crawler's queue of URLs, one queue per host, that hands a
// worker the next URL of a host whose provider in a [Registry] is ready now
// (see [Registry.ReadyAt]), taking hosts in turn. A worker is never handed
// the URL of a host that is paused, whose breaker is open, whose next
// pacing slot is still to come, or that already holds perHost workers: one
// worker pool crawls many hosts, and a slow or limited host holds at most
// perHost workers while the others keep theirs.
//
// A worker calls [Frontier.Next], fetches the URL through a client whose
// transport is the registry's [Transport], and hands the client's error to
// the done func Next returned. Frontier is safe for concurrent use. Each
// Next looks at every host with a URL waiting until it finds one ready:
// fine for thousands of hosts, not for millions. Asking a provider about
// its breaker may deliver a transition ([breaker.Config.OnTransition]) on
// the goroutine inside Next: such a hook must not call the Frontier.
//
// A crawl ends when every URL is fetched or dropped, or when its context
// or [Run] ends. A host that refuses everything (down, answering 503 and
// Retry-After to each request, or 429 for good) is called ever more
// slowly, down to the floor of its provider's adaptive rate
// ([aimd.Config.Min]), so that it is never hammered; each of its URLs
// takes longer to drop, and URLs its open breaker held back are put back.
// Bound a crawl that must end with a Run's deadline ([Envelope.Deadline]),
// given to Next and, with [WithCall], to the requests. A host that
// announces its quota in its headers is taken at its word up to the
// providers' [aimd.Config.Max] (10,000/s by default): a crawler sets Max
// to the most it will send one host, whatever the host says.
//
// A host's queue is the URLs of one provider key: the key [HostKey] gives,
// or Key's when it is set (a crawler polite per site rather than per host
// sets both its Transport's Key and this one to the same func). A host is
// forgotten once it has no URL waiting or out, and its provider is made by
// the Transport at its first request, not at Add: queuing a link costs the
// link, not a provider.
//
// The zero Frontier is not usable (its methods panic): make one with [NewFrontier].
type Frontier struct {
	// Key, if set, returns the provider key of a URL's request, instead
	// of [HostKey]: set it to the [Transport]'s Key, before the first Add.
	// (With the Transport keying by site and the Frontier by host, the
	// Frontier asked providers that were never called whether they were
	// ready, and dropped the URLs of a paused site unsent.)
	Key func(*http.Request) string

	reg     *Registry
	perHost int

	mu      sync.Mutex
	hosts   map[string]*hostQueue
	ring    []*hostQueue  // the hosts, in the order first seen; a forgotten one until the next compaction
	next    int           // where the next scan of ring starts
	queued  int           // URLs waiting, over all hosts
	out     int           // URLs handed out and not yet done
	gone    int           // forgotten hosts still in ring
	changed chan struct{} // closed and replaced when a URL is added or done
}

// hostQueue is one host's waiting URLs.
type hostQueue struct {
	key   string
	gone  bool     // forgotten: no URL waiting nor out; a new URL makes a new queue
	urls  []string // waiting from urls[head]
	head  int
	busy  int       // URLs of this host handed out and not yet done
	aside time.Time // not to be looked at again before then
	// paused counts, per URL, the times it came back because its host's
	// provider paused on its own word (see Frontier.pausedBy), or after a
	// call that was sent stopped (see Frontier.done); nil until the first.
	paused map[string]int
}

// pauseComebacks is how many times a URL comes back for its host's pause,
// or after a call that was sent stopped, before an error drops it: a host
// that answers 429 and a long Retry-After to every request, or never
// answers, ends its crawl all the same.
const pauseComebacks = 3

// NewFrontier returns an empty Frontier over reg's providers that lets at
// most perHost workers work on one host at once (keep it at or below the
// providers' [Config.MaxInFlight], or the extra workers wait for a slot).
// perHost must be at least 1.
func NewFrontier(reg *Registry, perHost int) (*Frontier, error) {
	if reg == nil {
		return nil, fmt.Errorf("%w: NewFrontier needs a *Registry (NewRegistry(RegistryConfig{}) gives the defaults)", ErrInvalidConfig)
	}
	if perHost < 1 {
		return nil, invalid.Must("NewFrontier's perHost", "be >= 1", perHost)
	}
	return &Frontier{reg: reg, perHost: perHost, hosts: map[string]*hostQueue{}, changed: make(chan struct{})}, nil
}

// Add queues rawURL at the back of its host's queue; the host is the
// provider key Key gives, or [HostKey] (the key the [Transport] uses). A
// URL that does not parse, names no host, or whose key is not a valid one
// (see [Registry.Get]: empty, over 1024 bytes, or holding a control, format
// or separator character) is an error and is not queued.
// A provider that cannot be made (see [Registry.Get]) is the error of the
// URL's fetch.
func (f *Frontier) Add(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("budget: frontier: %w", redact.Error(err)) // a link's query may hold a key
	}
	if u.Host == "" {
		return fmt.Errorf("budget: frontier: %q names no host", redact.String(rawURL))
	}
	req := &http.Request{Method: http.MethodGet, URL: u, Host: u.Host, Header: http.Header{}}
	key := HostKey(req)
	if f.Key != nil {
		key = f.Key(req)
	}
	if err := checkKey(key); err != nil {
		return fmt.Errorf("budget: frontier: the key of %s: %w", redact.String(rawURL), err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.hosts[key]
	if h == nil {
		h = &hostQueue{key: key}
		f.hosts[key] = h
		f.ring = append(f.ring, h)
	}
	h.urls = append(h.urls, rawURL)
	f.queued++
	f.wake()
	return nil
}

// forget drops h once it has no URL waiting nor out: a crawler that met
// 30,000 hosts kept every one, and each Next looked at them all. ring is
// compacted once half of it is forgotten. Callers hold f.mu.
func (f *Frontier) forget(h *hostQueue) {
	if h.gone || h.head < len(h.urls) || h.busy > 0 {
		return
	}
	h.gone = true
	delete(f.hosts, h.key)
	f.gone++
	if f.gone*2 < len(f.ring) {
		return
	}
	live := f.ring[:0]
	for i, g := range f.ring {
		if !g.gone {
			live = append(live, g)
		} else if i < f.next {
			f.next-- // keep the turn where it was
		}
	}
	clear(f.ring[len(live):])
	f.ring, f.gone = live, 0
	if f.next >= len(f.ring) {
		f.next = 0
	}
}

// Next returns the next URL of a host that is ready now, waiting until one
// is, and the func to call with the fetch's error (nil on success) when
// the worker is done with it. done puts the URL back at the head of its
// queue when the error says it was not sent, and the budget stopped it
// before any answer (a [*Error] for an open breaker, a pause, a spent quota,
// an operator's pause, a run deadline that comes before the host's next
// slot, or a call cancelled before it was sent); it then sets the host aside until the
// [Error.Until] the stop names. So does an error for a page its host
// refused with a pause the provider asked for (a Retry-After or a ban
// longer than [Config.MaxWait], whose answer the Transport hands back):
// the URL comes back when the pause ends, at most three times. A call
// the budget stopped after its request was sent (a cancelled call: the
// worker's own deadline over a host that never answers) comes back at
// most three times too. Any other error drops the URL: the caller counts it, and may Add it again. done
// reports whether it put the URL
// back, so a worker counts as failed exactly the URLs with an error that
// done did not put back. done must be called exactly once (later calls do
// nothing and report false).
//
// ok is false when ctx ends, when the [Run] ctx carries ([WithCall]) is
// spent, or when no URL is left: none waiting and none handed out (a URL
// handed out may come back).
func (f *Frontier) Next(ctx context.Context) (rawURL string, done func(err error) (again bool), ok bool) {
	run := runFrom(ctx)
	for {
		if _, spent := run.ExhaustedAt(time.Now()); spent || ctx.Err() != nil {
			return "", nil, false
		}
		now := time.Now()
		f.mu.Lock()
		h, wake := f.pick(now)
		if h != nil {
			u := h.pop()
			f.queued--
			f.out++
			f.mu.Unlock()
			return u, f.doneFunc(h, u, run), true
		}
		if f.queued == 0 && f.out == 0 {
			f.mu.Unlock()
			return "", nil, false
		}
		changed := f.changed
		f.mu.Unlock()
		if d, ok := run.Deadline(); ok && (wake.IsZero() || d.Before(wake)) {
			wake = d // the run ends then: Next returns
		}
		if !f.sleep(ctx, changed, wake) {
			return "", nil, false
		}
	}
}

// sleep waits until ctx ends (false), changed is closed, or wake (if set).
func (f *Frontier) sleep(ctx context.Context, changed <-chan struct{}, wake time.Time) bool {
	var ring <-chan time.Time
	if !wake.IsZero() {
		t := time.NewTimer(time.Until(wake))
		defer t.Stop()
		ring = t.C
	}
	select {
	case <-ctx.Done():
		return false
	case <-changed:
	case <-ring:
	}
	return true
}

// pick returns the first host from f.next with a URL waiting, a free
// worker slot and a provider ready at now, and books the host's next slot
// for the URL handed out: the host is set aside until the slot after it,
// so the next worker is not sent to wait behind this one. With none ready
// it returns the earliest time one may be (zero if only a finishing
// worker can free one). Callers hold f.mu.
func (f *Frontier) pick(now time.Time) (*hostQueue, time.Time) {
	var wake time.Time
	earliest := func(t time.Time) {
		if wake.IsZero() || t.Before(wake) {
			wake = t
		}
	}
	for i := range f.ring {
		h := f.ring[(f.next+i)%len(f.ring)]
		if h.gone || h.head == len(h.urls) || h.busy >= f.perHost {
			continue
		}
		if h.aside.After(now) {
			earliest(h.aside)
			continue
		}
		p := f.provider(h.key)
		if p == nil { // evicted while idle: its first slot is free; the next is known once it exists
			h.aside = now.Add(readyPoll)
		} else if at := p.readyAt(now, 1); at.After(now) {
			h.aside = at
			earliest(at)
			continue
		} else {
			h.aside = p.readyAt(now, 2)
		}
		f.next = (f.next + i + 1) % len(f.ring)
		h.busy++
		return h, time.Time{}
	}
	return nil, wake
}

// provider returns the provider for key, or nil if it has none yet.
func (f *Frontier) provider(key string) *local {
	if pr, ok := f.reg.Lookup(key); ok {
		return pr.(*entry).p
	}
	return nil
}

// doneFunc returns the done func of URL u handed out from h.
func (f *Frontier) doneFunc(h *hostQueue, u string, run *Run) func(error) bool {
	var once sync.Once
	return func(err error) (again bool) {
		once.Do(func() { again = f.done(h, u, run, err) })
		return again
	}
}

// done takes back URL u of host h, fetched with err (see [Frontier.Next]),
// and reports whether it was put back.
func (f *Frontier) done(h *hostQueue, u string, run *Run, err error) bool {
	now := time.Now()
	again, until := unsent(err, run, now)
	if e := (*Error)(nil); errors.As(err, &e) && e.Provider != "" && e.Provider != h.key {
		// Another host's stop: h's page was sent and redirected there.
		// It is not h's to wait out, nor to send again.
		again, until = false, time.Time{}
	}
	pausedUntil := time.Time{}
	if e := (*Error)(nil); err != nil && !again && !errors.As(err, &e) {
		pausedUntil = f.pausedBy(h.key, now)
	}
	// A call stopped after its request went out (the worker's own deadline
	// over a host that never answers, a breaker that opened between its
	// retries) was sent: it comes back as a paused page does, at most
	// pauseComebacks times (it came back after every deadline, and a
	// tarpit's page held the crawl until its context ended).
	e := (*Error)(nil)
	sent := again && errors.As(err, &e) && e.sent
	f.mu.Lock()
	defer f.mu.Unlock()
	h.busy--
	f.out--
	if sent {
		again = h.paused[u] < pauseComebacks
		if !again {
			until = time.Time{}
		}
	} else if pausedUntil.After(now) && h.paused[u] < pauseComebacks {
		again, until = true, pausedUntil
	}
	if again && (sent || pausedUntil.After(now)) {
		if h.paused == nil {
			h.paused = map[string]int{}
		}
		h.paused[u]++
	}
	if !again && h.paused != nil {
		delete(h.paused, u) // done with u: fetched or dropped
	}
	if again {
		h.pushFront(u)
		f.queued++
	}
	// What held the host back may have been this very call (its slot in
	// the bulkhead, its breaker probe): the next pick asks afresh.
	h.aside = until
	f.forget(h)
	f.wake()
	return again
}

// pausedBy returns the end of the pause key's provider is in by the
// provider's own word (a Retry-After or a ban the Transport could not wait
// out within MaxWait, and so handed back as the answer), or the zero time.
// A worker's error for a page of a host so paused is that answer: the
// page was refused, not broken, and comes back when the pause ends.
func (f *Frontier) pausedBy(key string, now time.Time) time.Time {
	p, ok := f.reg.Lookup(key)
	if !ok {
		return time.Time{}
	}
	s := p.Snapshot()
	switch s.PauseReason {
	case forage.ReasonThrottled, forage.ReasonBanned, forage.ReasonUnavailable:
		if s.PausedUntil.After(now) {
			return s.PausedUntil
		}
	}
	return time.Time{}
}

// unsent reports whether a fetch that ended with err stopped in the budget
// before any answer, so its URL should be fetched again, and until when its
// host should be left alone.
func unsent(err error, run *Run, now time.Time) (again bool, until time.Time) {
	var e *Error
	if !errors.As(err, &e) {
		return false, time.Time{}
	}
	switch e.Reason {
	case forage.ReasonCircuitOpen, forage.ReasonQuota, forage.ReasonPaused,
		forage.ReasonPacer, forage.ReasonCanceled, forage.ReasonRequestCap:
		again = true
	case forage.ReasonDeadline:
		again = true
		if d, ok := run.Deadline(); ok {
			until = d // the host's next slot comes after the run's end
		}
	case forage.ReasonThrottled, forage.ReasonBanned:
		again = e.Status == 0 && e.Err == nil // paused before sending
	}
	if e.Until.After(until) {
		until = e.Until
	}
	if again && e.Reason != forage.ReasonCanceled && !until.After(now) {
		until = now.Add(readyPoll) // e.g. a half-open breaker's probe still out
	}
	return again, until
}

// wake tells every waiting Next to look again. Callers hold f.mu.
func (f *Frontier) wake() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// pop takes the URL at the head of h's queue.
func (h *hostQueue) pop() string {
	u := h.urls[h.head]
	h.urls[h.head] = ""
	h.head++
	if h.head == len(h.urls) {
		h.urls, h.head = h.urls[:0], 0
	}
	return u
}

// pushFront puts u back at the head of h's queue.
func (h *hostQueue) pushFront(u string) {
	if h.head > 0 {
		h.head--
		h.urls[h.head] = u
		return
	}
	h.urls = append([]string{u}, h.urls...)
}
