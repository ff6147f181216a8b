package schedule

import (
	"fmt"
	"strings"
	"testing"
)

// TestDescribeIsBounded: Backfilled's error names at most maxDescribed
// backfills and counts the rest (a host with thousands of streams got an
// error of megabytes).
func TestDescribeIsBounded(t *testing.T) {
	t.Parallel()
	var left []unfinishedJob
	for i := range maxDescribed + 2 {
		left = append(left, unfinishedJob{desc: fmt.Sprintf("s%02d failed", i)})
	}
	got := describe(left)
	if n := strings.Count(got, " failed"); n != maxDescribed || !strings.HasSuffix(got, "; and 2 more") {
		t.Fatalf("describe = %q; want %d backfills named and the 2 more counted", got, maxDescribed)
	}
	if got := describe(left[:1]); got != "s00 failed" {
		t.Fatalf("describe of one = %q", got)
	}
}
