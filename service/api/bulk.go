package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/retrykit/retry/service/destination"
	"github.com/retrykit/retry/service/store"
)

// Limits of a bulk redrive or cancel: the tasks one call changes when the
// request names no limit, and at most.
const (
	DefaultBulkLimit = 500
	MaxBulkLimit     = 1000
)

// maxBulkScan bounds the tasks a bulk call with a cause reads, as
// maxCauseScan bounds GET /dead-letters/causes: the tasks of other causes
// stay where they are, and each call reads past them again.
const maxBulkScan = maxCauseScan

// bulkOp is one of the bulk transitions: which states it may move tasks
// from, those it does when the request names none, and to which.
type bulkOp struct {
	from     []store.Status
	defaults []store.Status
	to       store.Status
	verb     string // for messages
}

var (
	bulkRedrive = bulkOp{from: deadStates, defaults: deadStates, to: store.Pending, verb: "redriven"}
	// What DELETE /retry-tasks/{taskId} accepts; dead letters only when
	// the request asks for them, so that a cancel with no states never
	// dismisses a dead letter.
	bulkCancel = bulkOp{from: cancellable, defaults: []store.Status{store.Pending}, to: store.Cancelled, verb: "cancelled"}
)

// bulkRequest is a checked body of a bulk call.
type bulkRequest struct {
	filter store.TaskFilter // without Tenant
	cause  string
	limit  int
}

// bulkResult is the answer of a bulk call: how many tasks it changed, and
// whether more may match.
type bulkResult struct {
	Count int  `json:"count"`
	More  bool `json:"more"`
}

func (s *server) taskRedriveBulk(w http.ResponseWriter, r *http.Request, tenant string) error {
	return s.bulk(w, r, tenant, bulkRedrive)
}

func (s *server) taskCancelBulk(w http.ResponseWriter, r *http.Request, tenant string) error {
	return s.bulk(w, r, tenant, bulkCancel)
}

// bulk applies op to up to the request's limit of the tasks its filter
// matches, one TaskTransition each, as the single redrive and cancel do. A
// task changed meanwhile (claimed, cancelled, redriven by someone else) or
// gone is skipped. The tasks changed leave the filter, so a caller repeats
// the call until more is false; no cursor is needed, and none could stay
// right while tasks move.
func (s *server) bulk(w http.ResponseWriter, r *http.Request, tenant string, op bulkOp) error {
	data, err := s.readBody(w, r, s.maxBody)
	if err != nil {
		return err
	}
	req, err := parseBulk(data, op)
	if err != nil {
		return err
	}
	ctx := r.Context()
	f := req.filter
	f.Tenant = tenant
	var out bulkResult
	token, scanned := "", 0
	for {
		items, next, n, err := s.listMatching(ctx, f, req.cause, store.Page{Token: token, Limit: req.limit - out.Count}, maxBulkScan-scanned)
		if err != nil {
			return storeError(err, "list")
		}
		scanned += n
		for _, t := range items {
			ok, err := s.bulkOne(ctx, tenant, t.ID, f.Statuses, op)
			if err != nil {
				return err
			}
			if ok {
				out.Count++
			}
		}
		if next == "" {
			break
		}
		if out.Count >= req.limit || scanned >= maxBulkScan {
			out.More = true
			break
		}
		token = next
	}
	s.log.InfoContext(ctx, "api: bulk change", "to", op.to, "tenant", tenant, "count", out.Count, "more", out.More)
	s.writeJSON(w, http.StatusOK, out)
	return nil
}

// bulkOne moves one task from one of from to op.to, reporting whether it
// did: false, with no error, when the task left those states or is gone.
func (s *server) bulkOne(ctx context.Context, tenant, id string, from []store.Status, op bulkOp) (bool, error) {
	t, err := s.store.TaskTransition(ctx, store.Transition{Tenant: tenant, TaskID: id, From: from, To: op.to, Now: s.now()})
	switch {
	case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrNotFound):
		return false, nil
	case err != nil:
		return false, storeError(err, "task")
	}
	if op.to == store.Pending {
		s.wake(t)
	}
	return true, nil
}

// parseBulk checks a bulk call's body: {"status", "policyId", "targetHost",
// "destinationId", "cause", "limit"}, all optional. An empty body is {}. The states must be
// among op.from; they default to op.defaults.
func parseBulk(data []byte, op bulkOp) (*bulkRequest, error) {
	if len(strings.TrimSpace(string(data))) == 0 {
		data = []byte("{}")
	}
	m, err := parseObject(data)
	if err != nil {
		return nil, err
	}
	f := &fields{m: m}
	f.unknown("status", "policyId", "targetHost", "destinationId", "cause", "limit")
	req := &bulkRequest{limit: DefaultBulkLimit}
	if raw, ok := f.raw("status"); ok {
		req.filter.Statuses = bulkStatuses(f, raw, op)
	}
	if len(req.filter.Statuses) == 0 {
		req.filter.Statuses = slices.Clone(op.defaults)
	}
	// "" is no filter, as an absent member is.
	optional := func(why func(string) string) func(string) string {
		return func(v string) string {
			if v == "" {
				return ""
			}
			return why(v)
		}
	}
	req.filter.PolicyID, _ = f.check("policyId", false, optional(checkPolicyID))
	req.filter.TargetHost, _ = f.check("targetHost", false, optional(checkTargetHost))
	// A destination's tasks have its ID for a host (destination.Target).
	if id, _ := f.check("destinationId", false, checkDestinationID); id != "" {
		if req.filter.TargetHost != "" {
			f.bad("destinationId", "give destinationId or targetHost, not both")
		}
		req.filter.TargetHost = destination.HostOf(id)
	}
	req.cause, _ = f.check("cause", false, optional(checkCause))
	if raw, ok := f.raw("limit"); ok {
		if err := json.Unmarshal(raw, &req.limit); err != nil || req.limit < 1 || req.limit > MaxBulkLimit {
			f.bad("limit", fmt.Sprintf("must be a whole number from 1 to %d", MaxBulkLimit))
		}
	}
	if err := f.err(); err != nil {
		return nil, err
	}
	return req, nil
}

// bulkStatuses reads the status member: task states, each among op.from.
func bulkStatuses(f *fields, raw json.RawMessage, op bulkOp) []store.Status {
	var names []string
	if err := json.Unmarshal(raw, &names); err != nil {
		f.bad("status", "must be a list of task states")
		return nil
	}
	allowed := make([]string, len(op.from))
	for i, s := range op.from {
		allowed[i] = string(s)
	}
	var out []store.Status
	for _, n := range names {
		st := store.Status(strings.ToUpper(strings.TrimSpace(n)))
		if !slices.Contains(op.from, st) {
			f.bad("status", fmt.Sprintf("%q: only tasks in %s can be %s", n, strings.Join(allowed, " or "), op.verb))
			return nil
		}
		if !slices.Contains(out, st) {
			out = append(out, st)
		}
	}
	return out
}
