package slice

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/forage-go/forage/internal/durable"
)

// JSONLines is a [Sink] that stores records in a file as JSON, one record
// per line, keyed by a natural key: the upsert that a Sink must be, for a
// host whose records have no store of their own yet. A page replayed after
// a crash (between Write and the commit after it) writes nothing again: a
// record whose key is stored with the same content is skipped. A record
// whose key is stored with other content (the provider changed it since:
// a correction, a status that moved on) is appended again, and the last
// line of a key is its record; so is the last of a key repeated within a
// page. Write appends what is new and returns only after one fsync of the
// file; the file's directory entry is made durable when it is opened, so
// an append needs no other sync.
//
// A record is stored as [encoding/json] marshals it, which never writes a
// raw newline, so a provider's text cannot forge a line. When the file is
// opened, a torn last line (a crash mid-append) is cut off; any other line
// that does not decode into R, or whose key is empty, makes the open fail
// with an error naming the file and the line, never a silent skip.
//
// Open reads the whole file once, to learn its keys, and keeps each key
// in memory with a hash of its record's line. JSONLines is safe for
// concurrent use. One file is open in one JSONLines at a time: the open
// takes an exclusive lock on it (flock, on Unix systems; the kernel drops
// it when the process dies), and a second open, in this process or
// another, fails instead of cutting what it takes for a torn line while
// the first one appends.
type JSONLines[R any] struct {
	mu   sync.Mutex
	f    *os.File
	key  func(R) string
	have map[string]uint64 // key -> hash of its last line
}

// OpenJSONLines opens (creating) the file at path, and its directory, for
// records of type R, keyed by key: the natural key of a record (an ID, a
// symbol and a time), never empty. See [JSONLines] for what an open
// refuses.
func OpenJSONLines[R any](path string, key func(R) string) (*JSONLines[R], error) {
	if key == nil {
		return nil, errors.New("slice: OpenJSONLines: key is nil: give the function that returns a record's natural key")
	}
	if path == "" {
		return nil, errors.New("slice: OpenJSONLines: path is empty: give the file the records go to") // it read "open : no such file or directory"
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("slice: OpenJSONLines: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("slice: OpenJSONLines: %w", err) // "open /tmp/x: is a directory" said nothing of the sink
	}
	if err := durable.Lock(f); err != nil {
		_ = f.Close()
		if errors.Is(err, durable.ErrLocked) {
			return nil, fmt.Errorf("slice: %s is open in another JSONLines, in this process or another: a file has one writer", path)
		}
		return nil, fmt.Errorf("slice: lock %s: %w", path, err)
	}
	have, size, err := readKeys(f, key)
	if err == nil {
		err = cutTo(f, size)
	}
	if err == nil {
		// The file's name must survive a power loss before a record in it
		// is confirmed: it may have just been created.
		err = durable.SyncDir(filepath.Dir(path))
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return &JSONLines[R]{f: f, key: key, have: have}, nil
}

// readKeys reads every whole line of f, returning the keys stored, each
// with the hash of its last line, and the size of the file up to the end
// of its last whole line.
func readKeys[R any](f *os.File, key func(R) string) (map[string]uint64, int64, error) {
	have := make(map[string]uint64)
	size, err := scanLines(f, f.Name(), key, func(k string, _ R, line []byte) { have[k] = lineHash(line) })
	if err != nil {
		return nil, 0, err
	}
	return have, size, nil
}

// scanLines calls fn with the key, the record and the bytes (its newline
// cut) of each whole line of r, the file name, in order, and returns the
// size of r up to the end of its last whole line: a torn last line is left
// out. A line that is not a record, or has an empty key, is an error that
// names the file and the line.
func scanLines[R any](r io.Reader, name string, key func(R) string, fn func(k string, rec R, line []byte)) (int64, error) {
	br := bufio.NewReader(r)
	var size int64
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return size, nil // a torn last line, or none
		}
		if err != nil {
			return 0, fmt.Errorf("slice: read %s: %w", name, err)
		}
		size += int64(len(line))
		var rec R
		if err := json.Unmarshal(line, &rec); err != nil {
			return 0, fmt.Errorf("slice: %s, line %d, is not a record: %w (move the file aside, or cut the line, and run again)", name, n, err)
		}
		k := key(rec)
		if k == "" {
			return 0, fmt.Errorf("slice: %s, line %d, is a record with an empty key", name, n)
		}
		fn(k, rec, line[:len(line)-1])
	}
}

// ReadJSONLines returns the records of a file that a [JSONLines] keyed by
// key writes: the last record of each key (see JSONLines), in the order
// the keys first came. A torn last line (an append under way, or cut
// short by a crash) is left out; any other line that is not a record, or
// has an empty key, fails the read with an error naming the file and the
// line. It takes no lock: it may read beside the JSONLines that writes the
// file, and sees the records whose Write had returned when it began, at
// least. A file that does not exist holds no records.
func ReadJSONLines[R any](path string, key func(R) string) ([]R, error) {
	if key == nil {
		return nil, errors.New("slice: ReadJSONLines: key is nil: give the function that returns a record's natural key")
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var recs []R
	at := map[string]int{}
	if _, err := scanLines(f, path, key, func(k string, rec R, _ []byte) {
		if i, ok := at[k]; ok {
			recs[i] = rec
			return
		}
		at[k] = len(recs)
		recs = append(recs, rec)
	}); err != nil {
		return nil, err
	}
	return recs, nil
}

// lineHash is the hash by which Write tells a record stored again with the
// same content (a replay) from one the provider changed: encoding/json
// marshals equal values to equal bytes.
func lineHash(line []byte) uint64 {
	h := fnv.New64a()
	_, _ = h.Write(line)
	return h.Sum64()
}

// cutTo cuts f at size (a torn last line) if it is longer, and syncs it.
func cutTo(f *os.File, size int64) error {
	st, err := f.Stat()
	if err != nil || st.Size() == size {
		return err
	}
	if err := f.Truncate(size); err != nil {
		return fmt.Errorf("slice: cut the torn last line of %s: %w", f.Name(), err)
	}
	return f.Sync()
}

// Write appends the page's records whose keys are not stored yet, or are
// stored with other content (of a key repeated within the page, the last
// record), and syncs the file. A record that does not marshal, whose key
// is empty, or whose JSON line reads back with another key (a key of bytes
// that are not UTF-8, which JSON replaces, or of a field JSON does not
// write), fails the whole write before anything is appended. On an
// error nothing of the page counts as stored, and the file is cut back to
// where it was.
func (s *JSONLines[R]) Write(_ context.Context, p Page[R]) error {
	lines := make([][]byte, len(p.Records))
	keys := make([]string, len(p.Records))
	for i, r := range p.Records {
		if keys[i] = s.key(r); keys[i] == "" {
			return fmt.Errorf("slice: %s: record %d of the page has an empty key: not stored", s.f.Name(), i)
		}
		b, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("slice: %s: record %d of the page: %w", s.f.Name(), i, err)
		}
		// The key is read again from the line when the file is opened
		// (and by ReadJSONLines): a record whose line gives another key
		// would be stored under one and read under the other. JSON writes
		// bytes that are not UTF-8 as U+FFFD: two records keyed "a\xff"
		// and "a\xfe" were both stored, and read back as one.
		var back R
		if err := json.Unmarshal(b, &back); err != nil {
			return fmt.Errorf("slice: %s: record %d of the page does not read back from its JSON: %w: not stored", s.f.Name(), i, err)
		}
		if k := s.key(back); k != keys[i] {
			return fmt.Errorf("slice: %s: record %d of the page reads back from its JSON line with the key %q, not %q (bytes that are not UTF-8, or a field JSON does not write): JSON lines cannot keep it apart; not stored",
				s.f.Name(), i, k, keys[i])
		}
		lines[i] = b
	}
	last := make(map[string]int, len(keys)) // a key repeated in p: its last record
	for i, k := range keys {
		last[k] = i
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var buf bytes.Buffer
	type was struct {
		hash   uint64
		stored bool
	}
	before := map[string]was{} // what each key appended had, to undo
	for i, k := range keys {
		h := lineHash(lines[i])
		old, stored := s.have[k]
		if last[k] != i || stored && old == h {
			continue
		}
		before[k] = was{old, stored}
		s.have[k] = h
		buf.Write(lines[i])
		buf.WriteByte('\n')
	}
	if err := s.append(buf.Bytes()); err != nil {
		for k, w := range before { // not stored after all
			if w.stored {
				s.have[k] = w.hash
			} else {
				delete(s.have, k)
			}
		}
		return err
	}
	return nil
}

// append appends data to the file and syncs it; on an error it cuts the
// file back, so the next append does not follow a torn line.
func (s *JSONLines[R]) append(data []byte) error {
	if err := durable.Append(s.f, data); err != nil {
		return fmt.Errorf("slice: %w", err)
	}
	return nil
}

// Has reports whether a record with key k is stored.
func (s *JSONLines[R]) Has(k string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.have[k]
	return ok
}

// Len returns how many keys are stored: records, a record's earlier
// versions not counted.
func (s *JSONLines[R]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.have)
}

// Close closes the file.
func (s *JSONLines[R]) Close() error { return s.f.Close() }
