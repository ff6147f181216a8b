package checkpoint_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forage-go/forage/checkpoint"
)

// TestFileStoreCorruptionSaysHowToRecover: a corrupt file of each kind
// makes OpenFileStore fail with an error that names the file, says to move
// it out of the directory and what that loses; following the advice, the
// store opens again, without that record.
func TestFileStoreCorruptionSaysHowToRecover(t *testing.T) {
	t.Parallel()
	cases := []struct {
		prefix string
		loses  string // what the advice must say is lost
		gone   func(ctx context.Context, s *checkpoint.LocalStore) bool
	}{
		{"stream-", "starts from the beginning", func(ctx context.Context, s *checkpoint.LocalStore) bool {
			cp, err := s.Load(ctx, checkpoint.Key{Stream: "binance/BTC-USDT/1h", Mode: checkpoint.CatchUp})
			return err == nil && cp.Version == 0
		}},
		{"coverage-", "fetch its ranges again", func(ctx context.Context, s *checkpoint.LocalStore) bool {
			c, err := s.Coverage(ctx, "BTC-USDT/1h")
			return err == nil && len(c.Ranges()) == 0
		}},
		{"gaps", "unresolved gap records", func(ctx context.Context, s *checkpoint.LocalStore) bool {
			g, err := s.ListGaps(ctx, checkpoint.GapQuery{})
			return err == nil && len(g) == 0
		}},
	}
	for _, c := range cases {
		t.Run(strings.TrimSuffix(c.prefix, "-"), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			files := damaged(t, dir)
			var file string
			for _, f := range files {
				if strings.HasPrefix(filepath.Base(f), c.prefix) {
					file = f
				}
			}
			if err := os.WriteFile(file, []byte("FGCK garbage"), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := checkpoint.OpenFileStore(dir, checkpoint.Config{})
			if !errors.Is(err, checkpoint.ErrCorrupt) {
				t.Fatalf("OpenFileStore with %s corrupt: %v, want ErrCorrupt", filepath.Base(file), err)
			}
			for _, want := range []string{file, "move the file out of the directory", c.loses} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			// Follow the advice.
			if err := os.Rename(file, filepath.Join(t.TempDir(), "aside")); err != nil {
				t.Fatal(err)
			}
			s := openFile(t, dir, func() time.Time { return t0 })
			if !c.gone(t.Context(), s) {
				t.Errorf("after moving %s aside: its record is still there", filepath.Base(file))
			}
		})
	}
}
