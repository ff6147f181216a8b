package checkpoint_test

import (
	"testing"
	"time"

	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/checkpoint/checkpointtest"
)

func TestMemoryStore(t *testing.T) {
	t.Parallel()
	checkpointtest.Run(t, func(t *testing.T, now func() time.Time) checkpoint.Store {
		return checkpoint.NewMemoryStore(checkpoint.Config{Now: now})
	})
}
