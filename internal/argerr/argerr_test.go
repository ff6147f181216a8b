package argerr_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/forage-go/forage/internal/argerr"
)

var errInvalid = errors.New("pkg: invalid argument")

func TestError(t *testing.T) {
	t.Parallel()
	err := argerr.New(errInvalid, "Spec.Kind", "must be a valid kind", `"sideways"`)
	if got, want := err.Error(), `pkg: invalid argument: Spec.Kind must be a valid kind (got "sideways")`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	wrapped := fmt.Errorf("store: %w", err)
	if !errors.Is(wrapped, errInvalid) {
		t.Error("a wrapped Error does not match its sentinel")
	}
	if field, ok := argerr.Field(wrapped); !ok || field != "Spec.Kind" {
		t.Errorf("Field(wrapped) = %q, %v; want Spec.Kind, true", field, ok)
	}
	if field, ok := argerr.Field(fmt.Errorf("%w: id 3", errInvalid)); ok || field != "" {
		t.Errorf("Field of a plain error = %q, %v; want \"\", false", field, ok)
	}
}
