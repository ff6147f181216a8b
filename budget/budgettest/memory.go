package budgettest

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
)

// NewShareStore returns a [budget.ShareWatcher] kept in memory: the
// processes that share a provider simulated in one process, as tests and
// examples run them, and the reference [RunShareStore] is checked against.
// Its documents last as long as the value.
//
// UpdateShares reads the document kept under key (nil when none is), calls
// f with it, and keeps what f returns, all under one lock, so no other
// UpdateShares of key comes between; an error from f is returned and
// nothing changes. AnnounceShares calls the watchers of key with doc, in
// the calling goroutine, once the lock is released. Both fail with an error
// wrapping [checkpoint.ErrInvalid] for a key that is not a valid name
// ([checkpoint.CheckName]), and with the ctx's error once it has ended,
// and then change and call nothing.
//
// The store is safe for concurrent use.
func NewShareStore() budget.ShareWatcher {
	return &shareStore{docs: map[string][]byte{}, watchers: map[string][]*shareWatch{}}
}

// shareStore is the store NewShareStore returns.
type shareStore struct {
	mu       sync.Mutex
	docs     map[string][]byte
	watchers map[string][]*shareWatch
}

// enter checks key and ctx, then locks.
func (s *shareStore) enter(ctx context.Context, key string) error {
	if err := checkpoint.CheckName("provider key", key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("budgettest: %w", err)
	}
	s.mu.Lock()
	return nil
}

func (s *shareStore) UpdateShares(ctx context.Context, key string, f func(doc []byte) ([]byte, error)) error {
	if err := s.enter(ctx, key); err != nil {
		return err
	}
	defer s.mu.Unlock()
	next, err := f(slices.Clone(s.docs[key]))
	if err != nil {
		return err
	}
	s.docs[key] = slices.Clone(next)
	return nil
}

func (s *shareStore) AnnounceShares(ctx context.Context, key string, doc []byte) error {
	if err := s.enter(ctx, key); err != nil {
		return err
	}
	watchers := slices.Clone(s.watchers[key])
	s.mu.Unlock()
	for _, w := range watchers {
		w.deliver(doc)
	}
	return nil
}

func (s *shareStore) WatchShares(key string, f func(doc []byte)) (stop func()) {
	w := &shareWatch{f: f}
	s.mu.Lock()
	s.watchers[key] = append(s.watchers[key], w)
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.watchers[key] = slices.DeleteFunc(s.watchers[key], func(x *shareWatch) bool { return x == w })
		if len(s.watchers[key]) == 0 {
			delete(s.watchers, key)
		}
		s.mu.Unlock()
		w.mu.Lock() // a delivery under way ends first
		w.stopped = true
		w.mu.Unlock()
	}
}

// shareWatch is one WatchShares: its f, called under mu until stopped.
type shareWatch struct {
	mu      sync.Mutex
	stopped bool
	f       func(doc []byte)
}

func (w *shareWatch) deliver(doc []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		w.f(slices.Clone(doc))
	}
}
