package schedule_test

import (
	"testing"

	"github.com/forage-go/forage/schedule"
	"github.com/forage-go/forage/schedule/jobstoretest"
)

func TestMemoryStore(t *testing.T) {
	t.Parallel()
	jobstoretest.Run(t, func(t *testing.T) schedule.JobStore { return schedule.NewMemoryJobStore() })
}
