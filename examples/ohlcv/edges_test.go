package main

import (
	"context"
	"strings"
	"testing"
)

// TestUnreachableStoreWithJSONPrintsAFailedLine: with -json, a program
// reading stdout gets its one line even when the store cannot be opened:
// status failed, the error, and nothing collected.
func TestUnreachableStoreWithJSONPrintsAFailedLine(t *testing.T) {
	t.Parallel()
	r := cli(context.Background(), "-json", "-store", "postgres://nobody:secret@127.0.0.1:1/nothing?connect_timeout=5")
	if r.code != exitError {
		t.Fatalf("exit %d, want %d", r.code, exitError)
	}
	s := decodeSummary(t, r.stdout)
	if s.Status != "failed" || !strings.Contains(s.Error, "127.0.0.1") || s.Store != "postgres" || s.Candles != 0 {
		t.Fatalf("summary %+v: want status failed naming the store", s)
	}
	if strings.Contains(r.stdout+r.stderr, "secret") {
		t.Fatalf("the password leaked: stdout %q stderr %q", r.stdout, r.stderr)
	}
	isOneLine(t, r.stderr, "127.0.0.1")
}

// TestInvalidSchemaIsAUsageError: a -pg-schema PostgreSQL cannot take is a
// bad flag (exit 2, naming the flag), found before connecting.
func TestInvalidSchemaIsAUsageError(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"-store", "postgres://nobody@127.0.0.1:1/x", "-pg-schema", "bad-name;drop"},
		{"export", "-store", "postgres://nobody@127.0.0.1:1/x", "-pg-schema", "1abc"},
	} {
		r := cli(context.Background(), args...)
		if r.code != exitUsage {
			t.Fatalf("%v: exit %d, stderr %q; want %d", args, r.code, r.stderr, exitUsage)
		}
		isOneLine(t, r.stderr, "-pg-schema")
	}
}
