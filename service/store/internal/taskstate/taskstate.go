// Package taskstate is the state the stores index a task's status under:
// Live for PENDING and IN_FLIGHT, which claims and retries move a task
// between without touching the indexes of the lists, and the terminal
// status itself otherwise. The states are stored (columns of the SQL
// stores, list index keys of Redis): they must not change.
package taskstate

import "github.com/retrykit/retry/service/store"

// Live is the state of PENDING and IN_FLIGHT tasks.
const Live = "LIVE"

// Of returns the state of status s.
func Of(s store.Status) string {
	if s.Terminal() {
		return string(s)
	}
	return Live
}

// All returns every state, Live first.
func All() []string {
	return []string{Live, string(store.Succeeded), string(store.Exhausted), string(store.Failed), string(store.Cancelled)}
}

// Known reports whether s is one of the task statuses.
func Known(s store.Status) bool {
	switch s {
	case store.Pending, store.InFlight, store.Succeeded, store.Exhausted, store.Failed, store.Cancelled:
		return true
	}
	return false
}
