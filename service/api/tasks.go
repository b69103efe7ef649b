package api

import (
	"errors"
	"net/http"
	"strings"

	"github.com/retrykit/retry/service/store"
)

// taskID returns the path's task ID in lower case, as task IDs are made
// and stored: a UUID's hex digits are case-insensitive. One that is no UUID
// names no task.
func taskID(r *http.Request) (string, error) {
	id := r.PathValue("taskId")
	if !store.IsID(id) {
		return "", errorf(http.StatusNotFound, CodeNotFound, "", "task not found")
	}
	return strings.ToLower(id), nil
}

func (s *server) taskGet(w http.ResponseWriter, r *http.Request, tenant string) error {
	id, err := taskID(r)
	if err != nil {
		return err
	}
	t, err := s.store.TaskGet(r.Context(), tenant, id)
	if err != nil {
		return storeError(err, "task")
	}
	s.writeJSON(w, http.StatusOK, taskJSON(t))
	return nil
}

func (s *server) taskList(w http.ResponseWriter, r *http.Request, tenant string) error {
	q, err := parseQuery(r, "status", "policyId", "targetHost", "destinationId", "idempotencyKey", "cause", "pageToken", "limit")
	if err != nil {
		return err
	}
	return s.writeTasks(w, r, q.filter(tenant), q)
}

func (s *server) deadLetterList(w http.ResponseWriter, r *http.Request, tenant string) error {
	q, err := parseQuery(r, "policyId", "targetHost", "destinationId", "cause", "pageToken", "limit")
	if err != nil {
		return err
	}
	q.statuses = []store.Status{store.Exhausted, store.Failed}
	return s.writeTasks(w, r, q.filter(tenant), q)
}

// writeTasks answers a page of the tasks matching f and q's cause; see
// listMatching for the short pages a cause may give.
func (s *server) writeTasks(w http.ResponseWriter, r *http.Request, f store.TaskFilter, q query) error {
	items, next, _, err := s.listMatching(r.Context(), f, q.cause, q.page, maxCauseListScan)
	if err != nil {
		return listError(err, q)
	}
	out := list[*task]{Items: make([]*task, len(items)), NextPageToken: next}
	for i, t := range items {
		out.Items[i] = taskJSON(t)
	}
	s.writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *server) attemptList(w http.ResponseWriter, r *http.Request, tenant string) error {
	id, err := taskID(r)
	if err != nil {
		return err
	}
	q, err := parseQuery(r, "pageToken", "limit")
	if err != nil {
		return err
	}
	// The task's trace and budget start give each attempt its span ID.
	t, err := s.store.TaskGet(r.Context(), tenant, id)
	if err != nil {
		return storeError(err, "task")
	}
	items, next, err := s.store.AttemptList(r.Context(), tenant, id, q.page)
	if errors.Is(err, store.ErrNotFound) {
		return storeError(err, "task")
	}
	if err != nil {
		return listError(err, q)
	}
	out := list[attempt]{Items: make([]attempt, len(items)), NextPageToken: next}
	for i, a := range items {
		out.Items[i] = attemptJSON(t, a)
	}
	s.writeJSON(w, http.StatusOK, out)
	return nil
}

// deadStates are the dead letters' states, which a redrive starts afresh.
var deadStates = []store.Status{store.Exhausted, store.Failed}

// cancellable are the states a cancel moves to CANCELLED: a PENDING task,
// whose attempts stop, and a dead letter, dismissed so that it leaves the
// dead-letter list. Any other state is a 409 that says which state the
// task is in: an IN_FLIGHT attempt cannot be called back, and a task that
// succeeded or was cancelled has nothing left to cancel.
var cancellable = []store.Status{store.Pending, store.Exhausted, store.Failed}

// taskCancel cancels a task in one of the cancellable states.
func (s *server) taskCancel(w http.ResponseWriter, r *http.Request, tenant string) error {
	return s.transition(w, r, tenant, cancellable, store.Cancelled,
		"only a PENDING task or a dead letter (EXHAUSTED, FAILED) can be cancelled")
}

// taskRedrive turns a dead letter (EXHAUSTED or FAILED) back into a PENDING
// task, due now, with its attempt count and time budget starting afresh and
// its idempotency key unchanged.
func (s *server) taskRedrive(w http.ResponseWriter, r *http.Request, tenant string) error {
	return s.transition(w, r, tenant, deadStates, store.Pending,
		"only an EXHAUSTED or FAILED task can be redriven")
}

func (s *server) transition(w http.ResponseWriter, r *http.Request, tenant string, from []store.Status, to store.Status, rule string) error {
	id, err := taskID(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	t, err := s.store.TaskTransition(ctx, store.Transition{Tenant: tenant, TaskID: id, From: from, To: to, Now: s.now()})
	if errors.Is(err, store.ErrConflict) {
		if cur, gerr := s.store.TaskGet(ctx, tenant, id); gerr == nil {
			return errorf(http.StatusConflict, CodeConflict, "", "task is %s: %s", cur.Status, rule)
		}
		return errorf(http.StatusConflict, CodeConflict, "", "%s", rule)
	}
	if err != nil {
		return storeError(err, "task")
	}
	if to == store.Pending {
		s.wake(t)
	}
	s.writeJSON(w, http.StatusOK, taskJSON(t))
	return nil
}
