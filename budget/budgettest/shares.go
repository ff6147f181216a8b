package budgettest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/forage-go/forage/budget"
	"pgregory.net/rapid"
)

// RunShareStore runs the contract of [budget.ShareStore] against the
// stores newStore returns: a key never updated reads nil; what f returns is
// what the next update reads, byte for byte, checked step by step against a
// model over several keys; an error from f, or a ctx that has ended,
// changes nothing; concurrent updates of one key from many goroutines lose
// none (each adds one to a counter); and a key that is not a valid name is
// an error. A store that is also a [budget.ShareWatcher] delivers what is
// announced under a key to its watchers (within 10 s, announced again
// every 100 ms; another key's never), and no longer once stop has
// returned; an invalid key cannot be announced. newStore is called once per
// subtest, with the subtest's t, and subtests run in parallel: each store
// returned must share no state with the others.
func RunShareStore(t *testing.T, newStore func(t *testing.T) budget.ShareStore) {
	t.Helper()
	for _, tc := range []struct {
		name string
		test func(*testing.T, budget.ShareStore)
	}{
		{"Model", testSharesModel},
		{"Atomic", testSharesAtomic},
		{"Failed", testSharesFailed},
		{"Invalid", testSharesInvalid},
		{"Watch", testSharesWatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.test(t, newStore(t))
		})
	}
}

// read returns the document kept under key, updating it to itself.
func read(t rapid.TB, s budget.ShareStore, key string) []byte {
	var got []byte
	err := s.UpdateShares(context.Background(), key, func(doc []byte) ([]byte, error) {
		got = bytes.Clone(doc)
		return doc, nil
	})
	if err != nil {
		t.Fatalf("UpdateShares(%q) to read: %v", key, err)
	}
	return got
}

func testSharesModel(t *testing.T, s budget.ShareStore) {
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		prefix := fmt.Sprintf("run%d-", run) // each check starts from keys never used
		model := map[string][]byte{}
		for i := range rapid.IntRange(1, 20).Draw(rt, "steps") {
			key := prefix + rapid.SampledFrom([]string{"a.example.com", "b.example.com", "c"}).Draw(rt, fmt.Sprint("key", i))
			next := rapid.SliceOfN(rapid.Byte(), 1, 64).Draw(rt, fmt.Sprint("doc", i))
			var seen []byte
			err := s.UpdateShares(context.Background(), key, func(doc []byte) ([]byte, error) {
				seen = bytes.Clone(doc)
				return next, nil
			})
			if err != nil {
				rt.Fatalf("UpdateShares(%q): %v", key, err)
			}
			if !bytes.Equal(seen, model[key]) {
				rt.Fatalf("UpdateShares(%q) read %q; want %q", key, seen, model[key])
			}
			model[key] = bytes.Clone(next)
		}
	})
}

func testSharesAtomic(t *testing.T, s budget.ShareStore) {
	const n = 24
	const key = "atomic.example.com"
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			errs <- s.UpdateShares(context.Background(), key, func(doc []byte) ([]byte, error) {
				c := 0
				if len(doc) > 0 {
					var err error
					if c, err = strconv.Atoi(string(doc)); err != nil {
						return nil, err
					}
				}
				return []byte(strconv.Itoa(c + 1)), nil
			})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent UpdateShares: %v", err)
		}
	}
	if got := string(read(t, s, key)); got != strconv.Itoa(n) {
		t.Fatalf("after %d concurrent increments the counter reads %q; want %d: an update was lost", n, got, n)
	}
}

func testSharesFailed(t *testing.T, s budget.ShareStore) {
	const key = "failed.example.com"
	if err := s.UpdateShares(context.Background(), key, func([]byte) ([]byte, error) { return []byte("kept"), nil }); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := s.UpdateShares(context.Background(), key, func([]byte) ([]byte, error) { return []byte("lost"), boom })
	if !errors.Is(err, boom) {
		t.Fatalf("UpdateShares with f failing = %v; want f's error", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = s.UpdateShares(ctx, key, func([]byte) ([]byte, error) { return []byte("lost"), nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("UpdateShares with a cancelled ctx = %v; want an error wrapping context.Canceled", err)
	}
	if got := string(read(t, s, key)); got != "kept" {
		t.Fatalf("after failed updates the document reads %q; want %q", got, "kept")
	}
}

func testSharesInvalid(t *testing.T, s budget.ShareStore) {
	for _, key := range []string{"", "bad\xff", "new\nline", "bidi\u202ekey"} {
		called := false
		err := s.UpdateShares(context.Background(), key, func(doc []byte) ([]byte, error) { called = true; return doc, nil })
		if err == nil || called {
			t.Errorf("UpdateShares(%.20q) = %v, f called %v; want an error and no call", key, err, called)
		}
	}
}

func testSharesWatch(t *testing.T, s budget.ShareStore) {
	w, ok := s.(budget.ShareWatcher)
	if !ok {
		t.Skip("not a budget.ShareWatcher")
	}
	const key, other = "watch.example.com", "other.example.com"
	save := func(key string, doc []byte) { // as a renewal with news does
		t.Helper()
		if err := s.UpdateShares(context.Background(), key, func([]byte) ([]byte, error) { return doc, nil }); err != nil {
			t.Fatalf("UpdateShares(%q): %v", key, err)
		}
		if err := w.AnnounceShares(context.Background(), key, doc); err != nil {
			t.Fatalf("AnnounceShares(%q): %v", key, err)
		}
	}
	var (
		mu      sync.Mutex
		stopped bool
		late    [][]byte // delivered to the first watcher after its stop returned
	)
	first := w.WatchShares(key, func(doc []byte) {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			late = append(late, doc)
		}
	})
	got := make(chan []byte, 64)
	second := w.WatchShares(key, func(doc []byte) {
		select {
		case got <- doc:
		default: // a watcher must return quickly: a full channel drops
		}
	})
	defer second()
	// want waits for doc to reach the second watcher, saving and
	// announcing it again every 100 ms (a watch may take a moment to
	// start: delivery is best-effort); what came before it must be
	// documents of key.
	want := func(doc []byte) {
		t.Helper()
		timeout := time.After(10 * time.Second)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				save(key, doc)
			case d := <-got:
				if bytes.Equal(d, doc) {
					return
				}
				if d != nil && bytes.Equal(d, []byte(`{"other":true}`)) {
					t.Fatalf("the watcher of %q was given a document announced under %q", key, other)
				}
			case <-timeout:
				t.Fatalf("the document announced under %q did not reach its watcher within 10 s: want %q", key, doc)
			}
		}
	}
	if err := w.AnnounceShares(context.Background(), "bad\nkey", []byte(`{}`)); err == nil {
		t.Fatal("AnnounceShares of an invalid key: no error")
	}
	save(other, []byte(`{"other":true}`))
	save(key, []byte(`{"n":1}`))
	want([]byte(`{"n":1}`))
	first()
	mu.Lock()
	stopped = true
	mu.Unlock()
	save(key, []byte(`{"n":2}`))
	save(key, []byte(`{"n":3}`))
	want([]byte(`{"n":3}`))
	mu.Lock()
	defer mu.Unlock()
	if len(late) > 0 {
		t.Fatalf("a watcher was given %q after its stop returned", late)
	}
}
