package klines

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/forage-go/forage/internal/durable"
	"github.com/forage-go/forage/slice"
)

// FileSink stores the candles of one symbol and interval in a CSV file,
// open_time_ms,open,high,low,close,volume per line. Values are written
// only if they are decimal numbers, and lines are read back only if they
// are exactly such records, so a provider's text can never forge or
// overwrite a line. It upserts on the open time: a candle
// already stored is not written again, so replaying a slice after a crash
// changes nothing. Write appends and returns only after one fsync of the
// file: appending needs no other sync, since the file's directory entry is
// made durable when the sink is opened. A runner that merges pages
// ([slice.Config.MaxBatch]) pays that fsync once per batch. A torn last
// line (a crash mid-write) is cut off when the file is opened; any other
// line that is not a record makes the open fail ([ErrCorrupt]), never a
// silent skip. FileSink is safe for concurrent use.
type FileSink struct {
	mu   sync.Mutex
	f    *os.File
	have map[int64]bool
}

// OpenFileSink opens (creating) the file for symbol and interval in dir. A
// file with a line that is not a record, other than a torn last line, is
// refused with an error wrapping [ErrCorrupt] that names the file and the
// line and says how to recover.
func OpenFileSink(dir, symbol, interval string) (*FileSink, error) {
	for _, part := range []string{symbol, interval} {
		if !fileSafe(part) {
			// A symbol is a name on the exchange, never a path: "../x"
			// wrote outside dir.
			return nil, fmt.Errorf("klines: cannot name a candle file after %q: a symbol and an interval are letters, digits, '.', '_' and '-' only", part)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, symbol+"-"+interval+".csv")
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	if i := bytes.LastIndexByte(data, '\n'); i+1 != len(data) {
		data = data[:i+1] // cut a torn last line, in place: never rewrite the file
		if err := truncate(path, int64(len(data))); err != nil {
			return nil, err
		}
	}
	have := make(map[int64]bool)
	if err := eachRecord(path, data, func(c Candle) { have[c.OpenTime.UnixMilli()] = true }); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	// The file's name must survive a power loss before any candle in it is
	// confirmed: it may have just been created, here or by a process that
	// died before syncing its directory. Once per open, so Write never has
	// to.
	if err := durable.SyncDir(dir); err != nil {
		_ = f.Close()
		return nil, err
	}
	return &FileSink{f: f, have: have}, nil
}

// Write appends the page's candles that are not stored yet and syncs. A
// candle whose prices or volume are not decimal numbers, stored or not,
// fails the whole write before anything is appended: the file holds
// records only.
func (s *FileSink) Write(_ context.Context, p slice.Page[Candle]) error {
	var b []byte
	for _, c := range p.Records {
		if err := c.check(); err != nil {
			return fmt.Errorf("klines: %s: cannot store it: %w", s.f.Name(), err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var added []int64
	for _, c := range p.Records {
		ms := c.OpenTime.UnixMilli()
		if s.have[ms] {
			continue
		}
		b, _ = appendRecord(b, c) // checked above
		s.have[ms] = true         // for now: a repeat in p is skipped
		added = append(added, ms)
	}
	if err := s.append(b); err != nil {
		for _, ms := range added {
			delete(s.have, ms) // not stored after all
		}
		return err
	}
	return nil
}

// append appends data to the file and syncs it; on an error it cuts the
// file back, so the next append does not follow a torn line.
func (s *FileSink) append(data []byte) error {
	if err := durable.Append(s.f, data); err != nil {
		return fmt.Errorf("klines: %w", err)
	}
	return nil
}

// truncate cuts the file at path to size and syncs it.
func truncate(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return err
	}
	return f.Sync()
}

// fileSafe reports whether part may name a file in a directory and nothing
// else: letters, digits, '.', '_' and '-', not "." nor "..".
func fileSafe(part string) bool {
	if part == "" || part == "." || part == ".." {
		return false
	}
	for _, r := range part {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// Check returns nil if the file holds the last candle that a committed
// cursor of its stream says the provider showed, or an error naming that
// candle: a file restored from an older backup, or cut short, lacks it,
// and the stream would resume after the hole. A host checks its file
// against each of the stream's checkpoints when it opens the sink. A
// cursor that names no candle shown (none yet, or a plain cursor of an
// earlier version) has nothing to check. The cursor's own time
// ([DecodeCursor]) may end a stretch confirmed empty, with no candle
// there: Check looks for the candle, not for that time.
func (s *FileSink) Check(cursor []byte) error {
	at, shown := shownCandle(cursor)
	if !shown {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.have[at.UnixMilli()]:
		return nil
	case len(s.have) == 0:
		return fmt.Errorf("klines: %s holds no candles, but the cursor says the candle at %s was stored", s.f.Name(), at.Format(time.RFC3339))
	}
	return fmt.Errorf("klines: %s lacks the candle at %s, which the cursor says was stored", s.f.Name(), at.Format(time.RFC3339))
}

// Close closes the file.
func (s *FileSink) Close() error { return s.f.Close() }

// Export reads the candles of symbol and interval stored in dir, ascending
// by open time, one line each: open_time_ms,open,high,low,close,volume.
// A line that is not a record (see the file format in the package doc), other
// than a torn last line, fails the export with an error wrapping
// [ErrCorrupt] that names the file and the line; if an open time is stored
// twice, which the sink never writes,
// the first record wins: a later one can only be a forgery that an old
// version let in through a value with a newline.
func Export(dir, symbol, interval string) ([]string, error) {
	path := filepath.Join(dir, symbol+"-"+interval+".csv")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if i := bytes.LastIndexByte(data, '\n'); i+1 != len(data) {
		data = data[:i+1] // a torn last line is not a record
	}
	byTime := make(map[int64]Candle)
	err = eachRecord(path, data, func(c Candle) {
		if _, ok := byTime[c.OpenTime.UnixMilli()]; !ok {
			byTime[c.OpenTime.UnixMilli()] = c
		}
	})
	if err != nil {
		return nil, err
	}
	keys := slices.Sorted(maps.Keys(byTime))
	out := make([]string, len(keys))
	for i, k := range keys {
		line, _ := appendRecord(nil, byTime[k]) // read back, so valid
		out[i] = string(line[:len(line)-1])
	}
	return out, nil
}
