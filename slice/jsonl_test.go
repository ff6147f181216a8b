package slice_test

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/forage-go/forage/slice"
	"pgregory.net/rapid"
)

type keyed struct {
	K string `json:"k"`
	V string `json:"v"`
}

func keyOf(r keyed) string { return r.K }

// fileLines returns the records of the whole lines of the file at path, in
// order, and fails t on a line that is not a record.
func fileLines(t interface {
	Helper()
	Fatalf(string, ...any)
}, path string) []keyed {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	var recs []keyed
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var r keyed
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		recs = append(recs, r)
	}
	return recs
}

// Whatever pages are written, replayed, changed and cut short by crashes
// that tear the last line, the last line of each key in the file is the
// last record written for it whose Write returned nil (a repeat within a
// page: its last), a record is appended only when its content changed (a
// replay writes nothing, before or after a reopen), and a torn line is
// never read back as a record. (The first version kept the first content
// of a key for good: a provider's correction was silently dropped.)
func TestJSONLinesKeepsTheLastContentOfEachKeyThroughReplaysAndCrashes(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		path := filepath.Join(os.TempDir(), "forage-jsonl-"+strconv.FormatUint(rapid.Uint64().Draw(t, "name"), 36)+".jsonl")
		defer os.Remove(path)
		os.Remove(path)
		sink, err := slice.OpenJSONLines(path, keyOf)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		want := map[string]string{} // key -> its last content written
		for range rapid.IntRange(1, 12).Draw(t, "steps") {
			if rapid.IntRange(0, 3).Draw(t, "crash") == 0 {
				sink.Close()
				// A crash mid-append: part of a line, never synced.
				torn := rapid.SampledFrom([]string{`{"k":"x`, `{"k":"torn","v":"1"}`, `{`, `"`}).Draw(t, "torn")
				f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
				f.WriteString(torn)
				f.Close()
				if sink, err = slice.OpenJSONLines(path, keyOf); err != nil {
					t.Fatalf("reopen after a torn line: %v", err)
				}
				continue
			}
			var p slice.Page[keyed]
			for range rapid.IntRange(0, 5).Draw(t, "records") {
				k := strconv.Itoa(rapid.IntRange(0, 9).Draw(t, "key"))
				v := rapid.SampledFrom([]string{"a", "b", "line\nbreak \""}).Draw(t, "content")
				p.Records = append(p.Records, keyed{K: k, V: v})
			}
			if err := sink.Write(context.Background(), p); err != nil {
				t.Fatalf("write: %v", err)
			}
			for _, r := range p.Records {
				want[r.K] = r.V
			}
		}
		sink.Close()
		got, prev := map[string]string{}, map[string]string{}
		for _, r := range fileLines(t, path) {
			if _, ok := want[r.K]; !ok {
				t.Fatalf("key %s stored, never written (a torn line read back?)", r.K)
			}
			if v, ok := prev[r.K]; ok && v == r.V {
				t.Fatalf("key %s appended again with the same content %q: a replay wrote a line", r.K, r.V)
			}
			prev[r.K], got[r.K] = r.V, r.V
		}
		if !maps.Equal(got, want) {
			t.Fatalf("the file's last line per key says %v, the last writes %v", got, want)
		}
		recs, err := slice.ReadJSONLines(path, keyOf)
		read := map[string]string{}
		for _, r := range recs {
			read[r.K] = r.V
		}
		if err != nil || len(recs) != len(want) || !maps.Equal(read, want) {
			t.Fatalf("ReadJSONLines = %v, %v; want one record per key, the last: %v", recs, err, want)
		}
		again, err := slice.OpenJSONLines(path, keyOf)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer again.Close()
		if again.Len() != len(want) {
			t.Fatalf("reopened with %d keys, want %d", again.Len(), len(want))
		}
		before, _ := os.Stat(path)
		var replay slice.Page[keyed]
		for k, v := range want {
			replay.Records = append(replay.Records, keyed{K: k, V: v})
		}
		if err := again.Write(context.Background(), replay); err != nil {
			t.Fatalf("replay: %v", err)
		}
		if after, _ := os.Stat(path); after.Size() != before.Size() {
			t.Fatalf("a replay of what is stored, after a reopen, grew the file from %d to %d bytes", before.Size(), after.Size())
		}
	})
}

// A line in the middle that is not a record (an edit by hand, another
// program's output) fails the open, naming the file and the line: never a
// record silently skipped and written again after it.
func TestJSONLinesRefusesAFileWithALineThatIsNotARecord(t *testing.T) {
	for name, body := range map[string]string{
		"not JSON":  `{"k":"a"}` + "\nGET /orders?page=2\n" + `{"k":"b"}` + "\n",
		"empty key": `{"k":"a"}` + "\n" + `{"v":"no key"}` + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "orders.jsonl")
			os.WriteFile(path, []byte(body), 0o644)
			_, err := slice.OpenJSONLines(path, keyOf)
			if err == nil || !strings.Contains(err.Error(), "orders.jsonl, line 2") {
				t.Fatalf("open = %v, want an error naming orders.jsonl, line 2", err)
			}
			if got, _ := os.ReadFile(path); string(got) != body {
				t.Fatalf("the refused file was changed: %q", got)
			}
			if _, err := slice.ReadJSONLines(path, keyOf); err == nil || !strings.Contains(err.Error(), "orders.jsonl, line 2") {
				t.Fatalf("ReadJSONLines = %v, want an error naming orders.jsonl, line 2", err)
			}
		})
	}
}

// A write that fails stores nothing: the page's new keys are not counted,
// a key it would have changed keeps its content, and the same page written
// again after the failure is stored whole.
func TestJSONLinesAFailedWriteCountsNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "orders.jsonl")
	sink, err := slice.OpenJSONLines(path, keyOf)
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.Write(context.Background(), slice.Page[keyed]{Records: []keyed{{K: "a", V: "1"}}}); err != nil {
		t.Fatal(err)
	}
	p := slice.Page[keyed]{Records: []keyed{{K: "a", V: "2"}, {K: "b"}}}
	sink.Close() // the disk goes away
	if err := sink.Write(context.Background(), p); err == nil {
		t.Fatal("a write to a closed file returned nil")
	}
	if !sink.Has("a") || sink.Has("b") || sink.Len() != 1 {
		t.Fatalf("a failed write counted keys, or lost one stored before: Len %d", sink.Len())
	}
	if err := sink.Write(context.Background(), slice.Page[keyed]{Records: []keyed{{K: ""}}}); err == nil || !strings.Contains(err.Error(), "empty key") {
		t.Fatalf("a record with no key: %v, want an error saying so", err)
	}
	sink, err = slice.OpenJSONLines(path, keyOf)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	if err := sink.Write(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if got := fileLines(t, path); !slices.Equal(got, []keyed{{K: "a", V: "1"}, {K: "a", V: "2"}, {K: "b"}}) {
		t.Fatalf("file lines %v, want a:1, then a:2 and b", got)
	}
	if _, err := slice.OpenJSONLines[keyed](path, nil); err == nil || !strings.Contains(err.Error(), "key is nil") {
		t.Fatalf("a nil key: %v, want an error naming key", err)
	}
}

// A file has one writer: a second open of a file a JSONLines holds, in
// this process or another, fails (it would cut the line the first one is
// appending as a torn line), and succeeds once the first is closed.
func TestJSONLinesAFileHasOneWriter(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" || runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		t.Skip("no flock in the standard library here")
	}
	path := filepath.Join(t.TempDir(), "orders.jsonl")
	first, err := slice.OpenJSONLines(path, keyOf)
	if err != nil {
		t.Fatal(err)
	}
	if second, err := slice.OpenJSONLines(path, keyOf); err == nil || !strings.Contains(err.Error(), "open in another JSONLines") {
		if second != nil {
			second.Close()
		}
		t.Fatalf("a second open of a file in use = %v, want an error saying so", err)
	}
	first.Close()
	second, err := slice.OpenJSONLines(path, keyOf)
	if err != nil {
		t.Fatalf("open after the first was closed: %v", err)
	}
	second.Close()
}

// ReadJSONLines gives each key's last record, in the order the keys first
// came, leaves out a torn last line (an append under way beside it), and
// reads a file that does not exist as empty.
func TestReadJSONLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "orders.jsonl")
	if recs, err := slice.ReadJSONLines(path, keyOf); err != nil || len(recs) != 0 {
		t.Fatalf("a missing file: %v, %v; want no records", recs, err)
	}
	os.WriteFile(path, []byte(`{"k":"a","v":"paid"}`+"\n"+`{"k":"b","v":"paid"}`+"\n"+`{"k":"a","v":"shipped"}`+"\n"+`{"k":"c","v":"pa`), 0o644)
	recs, err := slice.ReadJSONLines(path, keyOf)
	if want := []keyed{{K: "a", V: "shipped"}, {K: "b", V: "paid"}}; err != nil || !slices.Equal(recs, want) {
		t.Fatalf("ReadJSONLines = %v, %v; want %v", recs, err, want)
	}
	if _, err := slice.ReadJSONLines[keyed](path, nil); err == nil || !strings.Contains(err.Error(), "key is nil") {
		t.Fatalf("a nil key: %v, want an error naming key", err)
	}
}

// A record whose JSON line reads back with another key is refused, and
// nothing of its page stored: JSON writes bytes that are not UTF-8 as
// U+FFFD, and two records keyed "sym\xff" and "sym\xfe" were both stored,
// then read back as one (the first lost, Has false after a reopen). So is
// a key made of a field JSON does not write.
func TestJSONLinesRefusesAKeyItCannotReadBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "syms.jsonl")
	sink, err := slice.OpenJSONLines(path, keyOf)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	err = sink.Write(context.Background(), slice.Page[keyed]{Records: []keyed{{K: "ok"}, {K: "sym\xff"}, {K: "sym\xfe"}}})
	if err == nil || !strings.Contains(err.Error(), "record 1") || sink.Len() != 0 {
		t.Fatalf("keys that are not UTF-8: %v, %d stored; want an error naming record 1, nothing stored", err, sink.Len())
	}
	type hidden struct {
		ID string `json:"-"`
		V  int
	}
	hsink, err := slice.OpenJSONLines(filepath.Join(t.TempDir(), "hidden.jsonl"), func(h hidden) string { return h.ID })
	if err != nil {
		t.Fatal(err)
	}
	defer hsink.Close()
	if err := hsink.Write(context.Background(), slice.Page[hidden]{Records: []hidden{{ID: "a", V: 1}}}); err == nil {
		t.Fatal("a key of a field JSON does not write: stored")
	}
}

// TestOpenJSONLinesSaysWhatItCouldNotOpen: an open that fails says it is
// OpenJSONLines's, and of which path. An empty path read "open : no
// such file or directory", and a directory "open /tmp/x: is a
// directory", both with no word of the sink.
func TestOpenJSONLinesSaysWhatItCouldNotOpen(t *testing.T) {
	t.Parallel()
	key := func(s string) string { return s }
	if _, err := slice.OpenJSONLines("", key); err == nil || !strings.HasPrefix(err.Error(), "slice: OpenJSONLines: ") || !strings.Contains(err.Error(), "path") {
		t.Errorf("an empty path: err %v; want one naming OpenJSONLines and its path", err)
	}
	dir := t.TempDir()
	if _, err := slice.OpenJSONLines(dir, key); err == nil || !strings.HasPrefix(err.Error(), "slice: OpenJSONLines: ") || !strings.Contains(err.Error(), dir) {
		t.Errorf("a directory: err %v; want one naming OpenJSONLines and the path", err)
	}
}
