package slice_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
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

// fileKeys returns the keys of the whole lines of the file at path, in
// order, and fails t on a line that is not a record.
func fileKeys(t interface {
	Helper()
	Fatalf(string, ...any)
}, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	var keys []string
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var r keyed
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		keys = append(keys, r.K)
	}
	return keys
}

// Whatever pages are written, replayed, and cut short by crashes that tear
// the last line, the file holds every record whose Write returned nil, and
// each key once; a torn line is never read back as a record.
func TestJSONLinesStoresEachKeyOnceThroughReplaysAndCrashes(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		path := filepath.Join(os.TempDir(), "forage-jsonl-"+strconv.FormatUint(rapid.Uint64().Draw(t, "name"), 36)+".jsonl")
		defer os.Remove(path)
		os.Remove(path)
		sink, err := slice.OpenJSONLines(path, keyOf)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		stored := map[string]bool{}
		for step := range rapid.IntRange(1, 12).Draw(t, "steps") {
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
				p.Records = append(p.Records, keyed{K: k, V: "line\nbreak \"" + strconv.Itoa(step)})
			}
			if err := sink.Write(context.Background(), p); err != nil {
				t.Fatalf("write: %v", err)
			}
			for _, r := range p.Records {
				stored[r.K] = true
			}
		}
		sink.Close()
		keys := fileKeys(t, path)
		seen := map[string]bool{}
		for _, k := range keys {
			if seen[k] {
				t.Fatalf("key %s stored twice: %v", k, keys)
			}
			seen[k] = true
			if !stored[k] {
				t.Fatalf("key %s stored, never written (a torn line read back?): %v", k, keys)
			}
		}
		if len(seen) != len(stored) {
			t.Fatalf("file holds %d keys, %d were written: %v", len(seen), len(stored), keys)
		}
		again, err := slice.OpenJSONLines(path, keyOf)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer again.Close()
		if again.Len() != len(stored) {
			t.Fatalf("reopened with %d keys, want %d", again.Len(), len(stored))
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
		})
	}
}

// A write that fails stores nothing: the page's keys are not counted, and
// the same page written again after the failure is stored whole.
func TestJSONLinesAFailedWriteCountsNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "orders.jsonl")
	sink, err := slice.OpenJSONLines(path, keyOf)
	if err != nil {
		t.Fatal(err)
	}
	p := slice.Page[keyed]{Records: []keyed{{K: "a"}, {K: "b"}}}
	sink.Close() // the disk goes away
	if err := sink.Write(context.Background(), p); err == nil {
		t.Fatal("a write to a closed file returned nil")
	}
	if sink.Has("a") || sink.Len() != 0 {
		t.Fatalf("a failed write counted keys: Len %d", sink.Len())
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
	if got := fileKeys(t, path); strings.Join(got, ",") != "a,b" {
		t.Fatalf("file keys %v, want a,b", got)
	}
	if _, err := slice.OpenJSONLines[keyed](path, nil); err == nil || !strings.Contains(err.Error(), "key is nil") {
		t.Fatalf("a nil key: %v, want an error naming key", err)
	}
}
