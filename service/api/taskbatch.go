package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"github.com/retrykit/retry/service/destination"
	"github.com/retrykit/retry/service/store"
)

// batchItem is the answer for one task of a batch: status 201 or 200 with
// the task, as POST /retry-tasks would answer it, or a 4xx with the error
// it would have answered, its fields named from the batch's root
// ("tasks[3].targetUrl").
type batchItem struct {
	Status int       `json:"status"`
	Task   *task     `json:"task,omitempty"`
	Error  *APIError `json:"error,omitempty"`
}

// parseBatch reads a POST /retry-tasks/batch body, {"tasks": [...]}, and
// returns the tasks undecoded: each is checked on its own (by parseTask),
// so that a bad task is answered in its item instead of failing the others.
// The object around them is held to the rules of every body: valid UTF-8,
// no unknown or repeated member, nothing after it.
//
// The tasks are not walked token by token here (parseTask does that for
// each), so the strictness check costs what it costs for single creates.
func parseBatch(data []byte) ([]json.RawMessage, error) {
	if !utf8.Valid(data) {
		return nil, invalid("", "request body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, syntaxError(err)
	}
	if tok != json.Delim('{') {
		return nil, invalid("", `request body must be a JSON object: {"tasks": [...]}`)
	}
	var tasks json.RawMessage
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, syntaxError(err)
		}
		key, _ := tok.(string) // the decoder allows only a string here
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, syntaxError(err)
		}
		switch {
		case key != "tasks":
			return nil, invalid(key, `unknown field; the body is {"tasks": [...]}`)
		case tasks != nil:
			return nil, invalid(key, "field %q appears more than once", key)
		}
		tasks = v
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, syntaxError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, invalid("", "unexpected data after the JSON object")
	}
	if tasks == nil || string(tasks) == "null" {
		return nil, invalid("tasks", "is required: an array of 1 to %d tasks", MaxBatchTasks)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(tasks, &items); err != nil {
		return nil, invalid("tasks", "must be an array of task objects")
	}
	switch {
	case len(items) == 0:
		return nil, invalid("tasks", "is empty: give 1 to %d tasks", MaxBatchTasks)
	case len(items) > MaxBatchTasks:
		return nil, invalid("tasks", "holds %d tasks; at most %d per request", len(items), MaxBatchTasks)
	}
	return items, nil
}

// parseItem checks one task of a batch as POST /retry-tasks checks its
// body, its size limit included (without a blob store; with one, POST
// /retry-tasks streams larger bodies, which a batch, held in memory, does
// not take), so that a batch is no way around a rule.
func (s *server) parseItem(raw json.RawMessage, now time.Time, rule func(string) string) (*taskRequest, error) {
	if int64(len(raw)) > s.maxBody {
		return nil, invalid("", "is %d bytes; a task of a batch may be at most %d", len(raw), s.maxBody)
	}
	if t := bytes.TrimLeft(raw, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return nil, invalid("", "must be a task object")
	}
	return parseTask(raw, now, rule)
}

// taskCreateBatch creates up to MaxBatchTasks tasks with one store call, so
// one durable commit, answering for each what POST /retry-tasks would have.
// The tasks are created in order: one repeating the idempotency key of an
// earlier one is its repeat (200) or a conflict (409).
func (s *server) taskCreateBatch(w http.ResponseWriter, r *http.Request, tenant string) error {
	data, err := s.readBody(w, r, s.maxBatchBody)
	if err != nil {
		return err
	}
	raws, err := parseBatch(data)
	if err != nil {
		return err
	}
	ctx := r.Context()
	now := s.now()
	items := make([]batchItem, len(raws))
	fail := func(i int, err error) {
		e, ok := errors.AsType[*APIError](err)
		if !ok {
			e = &APIError{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error", cause: err}
		}
		if e.Status >= 500 {
			s.log.Error("api: batch item failed", "method", r.Method, "path", r.URL.Path, "item", i, "status", e.Status, "err", e.cause)
		}
		items[i] = batchItem{Status: e.Status, Error: e.within("tasks[" + strconv.Itoa(i) + "]")}
	}

	// Check every task, and each distinct policy once.
	tasks := make([]*store.Task, 0, len(raws))
	at := make([]int, 0, len(raws)) // at[j] is the item of tasks[j]
	known := make(map[string]bool)
	rule := s.bodyRefRule(tenant)
	dests := make(map[string]*destination.Destination)
	for i, raw := range raws {
		req, err := s.parseItem(raw, now, rule)
		if err == nil {
			err = s.resolveDestination(ctx, tenant, req, dests)
		}
		if err != nil {
			fail(i, err)
			continue
		}
		req.inheritTrace(r.Header) // the batch's context, for each task without one
		ok, seen := known[req.policyID]
		if !seen {
			if ok, err = s.policyKnown(ctx, tenant, req.policyID); err != nil {
				return storeError(err, "policy")
			}
			known[req.policyID] = ok
		}
		if !ok {
			fail(i, unknownPolicy(req.policyID))
			continue
		}
		// A body over the threshold goes to the blob store; a failure of
		// the store fails the batch, which then stores no task (a blob put
		// already is an orphan for the sweep).
		if err := s.settleBody(ctx, req); err != nil {
			return err
		}
		tasks = append(tasks, s.sealTask(req, req.newTask(tenant, now)))
		at = append(at, i)
	}

	var created []*store.Task // for the request's span, when it is recorded
	recording := trace.SpanFromContext(ctx).IsRecording()
	if len(tasks) > 0 {
		reserved := s.claimAtCreate(tasks)
		res, err := s.store.TaskCreateBatch(createCtx(ctx, reserved), tasks)
		if err == nil && len(res) != len(tasks) {
			err = fmt.Errorf("api: the store answered %d results for %d tasks", len(res), len(tasks))
		}
		if err != nil {
			s.settle(reserved, err, tasks)
			return storeError(err, "tasks")
		}
		for j, rr := range res {
			i := at[j]
			status, err := createAnswer(rr.Created, rr.Err, tasks[j].IdempotencyKey)
			if err != nil {
				fail(i, err)
				continue
			}
			if rr.Created {
				s.handOver(rr.Task, &reserved)
				if recording {
					created = append(created, rr.Task)
				}
			}
			items[i] = batchItem{Status: status, Task: taskJSON(rr.Task)}
		}
		s.settle(reserved, nil, nil) // before the answer, which a slow client may take a while to read
	}
	traced(ctx, created...)
	s.writeJSON(w, http.StatusOK, list[batchItem]{Items: items})
	return nil
}
