package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/forage-go/forage/internal/durable"
)

// lockName is the lock file's name; it holds no data.
const lockName = "LOCK"

// OpenFileStore opens a [LocalStore] that keeps its state in dir, creating
// the directory if needed, and loads every record. It fails with an error
// wrapping [ErrLocked] if another store has dir open, and with one wrapping
// [ErrCorrupt], naming the file, if any record fails its integrity check.
// Temporary files left by a crash mid-write are removed: they were never
// renamed into place, so they never held committed state.
//
// Layout: one file per stream (both bookmarks, the lease and its token),
// one file per coverage series, one file for the unresolved gaps, and one
// file per provider record (see [LocalStore.SaveRecord]), so a write
// rewrites only the record it changes. Every write goes to a temporary
// file that is synced, renamed over the old file, and the directory synced:
// after a crash each file holds either its old or its new content. Each
// file carries a length and a CRC-32C; a torn or corrupt file is never read
// as empty progress. Reads are served from memory; writes go through to
// disk before they return.
//
// A lock file (flock, on Unix systems) keeps a second store, in this or
// another process, from opening the same directory. So a lease found on
// opening belongs to a run that is over: its process died (kill -9, a
// crash) or closed the store without releasing. OpenFileStore ends every
// such lease at once: the next [LocalStore.Acquire] of the stream takes it
// over, with the next fencing token, instead of waiting for its expiry,
// and the old lease is refused from then on. (Where flock is missing, a
// lease found on opening is honoured until it expires.) [LocalStore.Close]
// releases the lock.
func OpenFileStore(dir string, cfg Config) (*LocalStore, error) {
	if dir == "" {
		return nil, fmt.Errorf("%w: OpenFileStore: dir must not be empty", ErrInvalid)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	lock, exclusive, err := lockDir(filepath.Join(dir, lockName))
	if err != nil {
		return nil, err
	}
	s := newLocal(cfg, &diskDir{dir, lock})
	if err := s.loadAll(); err != nil {
		_ = lock.Close()
		return nil, err
	}
	if exclusive {
		s.c.endLeases()
	}
	return s, nil
}

func (s *LocalStore) loadAll() error {
	entries, err := os.ReadDir(s.disk.dir)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, tmpPrefix) {
			if err := os.Remove(filepath.Join(s.disk.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("checkpoint: removing leftover: %w", err)
			}
			continue
		}
		if !strings.HasSuffix(name, fileExt) {
			continue // the lock file, or something that is not ours
		}
		if err := s.loadFile(name); err != nil {
			return err
		}
	}
	return nil
}

func (s *LocalStore) loadFile(name string) error {
	path := filepath.Join(s.disk.dir, name)
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	c := s.c
	switch {
	case name == gapsFile:
		c.lastGap, c.gaps, err = decodeGaps(data)
	case name == pausesFile:
		err = s.loadPauses(data)
	case strings.HasPrefix(name, providerPre):
		err = s.loadRecordFile(name, data)
	case strings.HasPrefix(name, streamPre):
		var stream string
		var st streamState
		if stream, st, err = decodeStream(name, data); err == nil {
			c.streams[stream] = st
		}
	case strings.HasPrefix(name, coveragePre):
		var series string
		var cov Coverage
		if series, cov, err = decodeCoverage(name, data); err == nil {
			c.cover[series] = cov
		}
	default:
		err = errors.New("not a file this store writes")
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %v; %s", ErrCorrupt, path, err, recovery(name))
	}
	return nil
}

// recovery says what the user can do about the corrupt file name, and
// what doing it loses.
func recovery(name string) string {
	const move = "to recover, stop every process using the store and move the file out of the directory (keep it for diagnosis)"
	switch {
	case name == gapsFile:
		return move + ": the store opens without its unresolved gap records, so the holes they describe are not refilled until found again, and gap IDs start over at 1"
	case strings.HasPrefix(name, streamPre):
		return move + ": the store opens without that stream's checkpoints and lease, so its next run starts from the beginning of the stream (an idempotent sink absorbs the replay; nothing is lost)"
	case strings.HasPrefix(name, providerPre):
		return move + ": the store opens without that provider's record, so the collector starts it again from the conservative rate and forgets a ban or Retry-After still in force, calling the provider at once; " +
			"calling a banned provider before its ban ends only extends the ban, so before restarting wait out the pause (the \"paused_until\" time in the file set aside, if readable; at most the collector's maximum pause, 1 hour by default)"
	case name == pausesFile:
		return move + ": the store opens without the providers' pauses, so the collector forgets every ban and Retry-After still in force and calls those providers at once; " +
			"calling a banned provider before its ban ends only extends the ban, so before restarting wait out the longest pause in force (the \"until\" times in the file set aside, if readable; at most the collector's maximum pause, 1 hour by default)"
	case strings.HasPrefix(name, coveragePre):
		return move + ": the store opens without that series' coverage, so fills fetch its ranges again (nothing is lost)"
	}
	return move + ": the store opens without what it held"
}

// diskDir is the persister of a file store: it writes records to the files of
// one directory, the one whose lock file it holds open.
type diskDir struct {
	dir  string
	lock *os.File
}

// tmpPrefix starts the names of files being written.
const tmpPrefix = ".tmp-"

func (d diskDir) saveStream(name string, st streamState) error {
	data, err := encodeStream(name, st)
	if err != nil {
		return err
	}
	return d.write(recordFile(streamPre, name), data)
}

func (d diskDir) saveCoverage(series string, c Coverage) error {
	data, err := encodeCoverage(series, c)
	if err != nil {
		return err
	}
	return d.write(recordFile(coveragePre, series), data)
}

func (d diskDir) saveGaps(lastID int64, open []Gap) error {
	data, err := encodeGaps(lastID, open)
	if err != nil {
		return err
	}
	return d.write(gapsFile, data)
}

// write replaces file atomically: temp file, fsync, rename, fsync the
// directory. An error before the rename leaves the old file in place; an
// error syncing the directory wraps errVisible, since the new content may
// already be what a reader sees.
func (d diskDir) write(file string, data []byte) error {
	dir := d.dir
	if err := d.held(); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, tmpPrefix+"*")
	if err != nil {
		return fmt.Errorf("checkpoint: writing %s: %w", file, err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, file))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("checkpoint: writing %s: %w", file, err)
	}
	if err := durable.SyncDir(dir); err != nil {
		return fmt.Errorf("%w: %s: %w", errVisible, file, err)
	}
	return nil
}

// held checks that the directory is still the one whose lock file d
// holds: a directory moved away and made again (a backup restored, an
// "rm -rf" to start over) while the store was open let a second store lock
// the new one, and both wrote to it (a checkpoint went back, a lease token
// was handed out twice). One stat per write, which fsyncs anyway.
func (d diskDir) held() error {
	if d.lock == nil {
		return nil
	}
	mine, err := d.lock.Stat()
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	there, err := os.Stat(filepath.Join(d.dir, lockName))
	if err != nil || !os.SameFile(mine, there) {
		return fmt.Errorf("%w: %s is no longer the directory this store locked (moved, made again, or its %s removed): nothing written; open it again", ErrLocked, d.dir, lockName)
	}
	return nil
}
