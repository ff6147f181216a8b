package budgettest_test

import (
	"testing"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/budget/budgettest"
)

// TestShareStore runs the ShareStore contract, the watch included, against
// the store kept in memory.
func TestShareStore(t *testing.T) {
	t.Parallel()
	budgettest.RunShareStore(t, func(*testing.T) budget.ShareStore {
		return budgettest.NewShareStore()
	})
}
