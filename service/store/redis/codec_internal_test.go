package redis

import (
	"testing"

	"github.com/retrykit/retry/service/store"
)

// taskFieldCount sizes each create call's arguments; a field added to
// taskFields must be counted there too.
func TestTaskFieldCount(t *testing.T) {
	if n := len(taskFields(nil, &store.Task{}, 0, "")); n != 2*taskFieldCount {
		t.Fatalf("taskFields appends %d fields; taskFieldCount says %d", n/2, taskFieldCount)
	}
}
