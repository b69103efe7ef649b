package taskstate_test

import (
	"slices"
	"testing"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/taskstate"
)

func TestStates(t *testing.T) {
	want := map[store.Status]string{store.Pending: "LIVE", store.InFlight: "LIVE", store.Succeeded: "SUCCEEDED",
		store.Exhausted: "EXHAUSTED", store.Failed: "FAILED", store.Cancelled: "CANCELLED"}
	for s, state := range want {
		if got := taskstate.Of(s); got != state || !taskstate.Known(s) || !slices.Contains(taskstate.All(), got) {
			t.Errorf("Of(%s) = %q, Known %v; want %q, known, in All", s, got, taskstate.Known(s), state)
		}
	}
	if len(taskstate.All()) != 5 {
		t.Errorf("All() = %v, want 5 states", taskstate.All())
	}
	if taskstate.Known("LIVE") || taskstate.Known("") {
		t.Error("Known accepts what is no status")
	}
}
