package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/klines"
	"github.com/forage-go/forage/schedule"
)

// backend is where candles and checkpoints live: a directory or PostgreSQL.
type backend interface {
	// checkpoints is the store of the streams' checkpoints, leases and
	// gap records.
	checkpoints() checkpoint.Store
	// sink sets st's Sink, or its TxSink where the candles and the
	// checkpoint commit in one transaction, for symbol at interval.
	sink(st *schedule.Stream[klines.Candle], symbol, interval string) error
	// shares is where the processes using the store share each
	// provider's rate by leases: nil for a provider of this process alone.
	shares() budget.ShareStore
	// records is where the registry keeps each provider's record: the
	// pause a provider asked for (a 429's Retry-After, a ban), so a restart
	// honours it, and the rate it learned, so a restart starts there.
	records() budget.RecordStore
	// first returns the open time of symbol's earliest stored candle at
	// interval, and false when none is stored; sink has been called for
	// it.
	first(ctx context.Context, symbol, interval string) (time.Time, bool, error)
	// export writes symbol's candles at interval, ascending, one CSV line
	// each, and returns how many.
	export(ctx context.Context, symbol, interval string, w io.Writer) (int, error)
	// transient reports whether err, which ended a stream run, is the
	// store going away for a moment, so that running again may succeed.
	transient(err error) bool
	// Close releases the store.
	Close() error
}

// openBackend opens the store -store names.
func openBackend(ctx context.Context, store, schema string) (backend, error) {
	if isPostgres(store) {
		return openPG(ctx, store, schema)
	}
	return openFiles(store)
}

// fileBackend keeps one CSV file per symbol and interval in dir (a
// [klines.FileSink], an upsert on the open time) and the checkpoints in a
// file store ([checkpoint.OpenFileStore]) in dir/checkpoints, which locks
// it against a second process.
type fileBackend struct {
	dir   string
	store *checkpoint.LocalStore
	mu    sync.Mutex
	sinks map[string]*klines.FileSink // by file
}

func openFiles(dir string) (*fileBackend, error) {
	st, err := checkpoint.OpenFileStore(filepath.Join(dir, "checkpoints"), checkpoint.Config{})
	if err != nil {
		if errors.Is(err, checkpoint.ErrLocked) {
			return nil, fmt.Errorf("the store %s is held by another live process: %w", dir, err)
		}
		return nil, err
	}
	return &fileBackend{dir: dir, store: st, sinks: make(map[string]*klines.FileSink)}, nil
}

func (b *fileBackend) sink(st *schedule.Stream[klines.Candle], symbol, interval string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	name := symbol + "-" + interval
	s, ok := b.sinks[name]
	if !ok {
		var err error
		if s, err = klines.OpenFileSink(b.dir, symbol, interval); err != nil {
			return err
		}
		if err := b.consistent(st.Name, s); err != nil {
			_ = s.Close()
			return err
		}
		b.sinks[name] = s
	}
	st.Sink = s
	return nil
}

// consistent refuses a candle file that lacks the last candle the
// stream's checkpoints say the provider showed and the store collected
// (the file was deleted, cut short, or restored from a backup older than
// the store): the stream would resume after it and call the run done with
// the hole. A cursor past a stretch confirmed empty names that candle too,
// not the stretch's end, where there is none. The fix is the user's:
// restore the file, or remove the stream's state too to collect it again.
func (b *fileBackend) consistent(stream string, s *klines.FileSink) error {
	for _, mode := range []checkpoint.Mode{checkpoint.CatchUp, checkpoint.SteadyState} {
		cp, err := b.store.Load(context.Background(), checkpoint.Key{Stream: stream, Mode: mode})
		if err != nil {
			return err
		}
		if err := s.Check(cp.Cursor); err != nil {
			return fmt.Errorf("ohlcv: %s: %w (the store's %s checkpoint): restore the file, or remove the store to collect again", stream, err, mode)
		}
	}
	return nil
}

func (b *fileBackend) checkpoints() checkpoint.Store { return b.store }

// first reads the stream's file back (klines.Export, ascending) for the
// open time of its first record: once per stream and run, when -since
// asks for earlier candles.
func (b *fileBackend) first(_ context.Context, symbol, interval string) (time.Time, bool, error) {
	lines, err := klines.Export(b.dir, symbol, interval)
	if errors.Is(err, fs.ErrNotExist) || err == nil && len(lines) == 0 {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, err
	}
	ms, _, _ := strings.Cut(lines[0], ",")
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return time.Time{}, false, err
	}
	return time.UnixMilli(n).UTC(), true, nil
}

// transient is false: a local disk's errors (full, read-only, corrupt)
// do not pass by themselves.
func (b *fileBackend) transient(error) bool { return false }

func (b *fileBackend) shares() budget.ShareStore { return nil }

// records is the checkpoint store: its record files outlive the process.
func (b *fileBackend) records() budget.RecordStore { return b.store }

func (b *fileBackend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	errs := []error{b.store.Close()}
	for _, s := range b.sinks {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

func (b *fileBackend) export(_ context.Context, symbol, interval string, w io.Writer) (int, error) {
	return exportFiles(b.dir, symbol, interval, w)
}

// exportFiles exports from a directory without opening its checkpoint
// store, so an export may run while a collector holds the store.
func exportFiles(dir, symbol, interval string, w io.Writer) (int, error) {
	lines, err := klines.Export(dir, symbol, interval)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("no %s %s candles in %s", symbol, interval, dir)
	}
	if err != nil {
		return 0, err
	}
	for _, l := range lines {
		if _, err := io.WriteString(w, l+"\n"); err != nil {
			return 0, err
		}
	}
	return len(lines), nil
}

// export runs the export command.
func export(ctx context.Context, o exportOptions, w io.Writer) error {
	if !isPostgres(o.store) {
		_, err := exportFiles(o.store, o.symbol, o.interval, w)
		return err
	}
	b, err := openPG(ctx, o.store, o.schema)
	if err != nil {
		return err
	}
	defer b.Close()
	_, err = b.export(ctx, o.symbol, o.interval, w)
	return err
}
