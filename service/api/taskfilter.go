package api

import (
	"context"
	"slices"

	"github.com/retrykit/retry/service/store"
)

// Bounds of a walk of the store that filters by cause, which the store
// cannot do: how many tasks one GET page reads before it answers with
// what it found (a short page, with the token to go on), and how many
// store pages that takes at most, since a page asks for only as many tasks
// as are still wanted and those may be few.
const (
	maxCauseListScan  = 10000
	maxCauseListCalls = 64
)

// deadStatuses narrows a filter of statuses to the dead letters', the only
// tasks with a cause: those of statuses that are EXHAUSTED or FAILED, both
// when statuses is empty. It returns nil when none is left.
func deadStatuses(statuses []store.Status) []store.Status {
	dead := deadStates
	if len(statuses) == 0 {
		return dead
	}
	return slices.DeleteFunc(slices.Clone(statuses), func(s store.Status) bool { return !slices.Contains(dead, s) })
}

// listMatching reads the tasks matching f, and cause unless it is "", from
// page.Token on: up to page.Limit of them (store.PageLimit's rules), the
// token to go on from (empty at the end of the list), and how many tasks
// it read. Without a cause it is one store page. With one, it reads store
// pages and keeps the tasks of that cause until it has enough, the list
// ends, or it has read maxScan tasks or maxCauseListCalls pages; each store
// page asks for no more tasks than are still wanted, so that it never has
// to stop inside a store page and the store's own token says where to go
// on. Its answer may then be short, or empty, with a token all the same.
func (s *server) listMatching(ctx context.Context, f store.TaskFilter, cause string, page store.Page, maxScan int) ([]*store.Task, string, int, error) {
	if cause == "" {
		items, next, err := s.store.TaskList(ctx, f, page)
		return items, next, len(items), err
	}
	if f.Statuses = deadStatuses(f.Statuses); len(f.Statuses) == 0 {
		return nil, "", 0, nil // only dead letters have a cause
	}
	want := store.PageLimit(page.Limit)
	var out []*store.Task
	token, scanned := page.Token, 0
	for calls := 0; len(out) < want && scanned < maxScan && calls < maxCauseListCalls; calls++ {
		items, next, err := s.store.TaskList(ctx, f, store.Page{Token: token, Limit: min(want-len(out), maxScan-scanned)})
		if err != nil {
			return nil, "", scanned, err
		}
		scanned += len(items)
		for _, t := range items {
			if taskCause(t) == cause {
				out = append(out, t)
			}
		}
		if token = next; token == "" {
			break
		}
	}
	return out, token, scanned, nil
}
