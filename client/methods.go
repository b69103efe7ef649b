package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// PutPolicy registers p. created is true when it is new, false when p.ID
// was registered with the same settings already; other settings are an
// *Error matching ErrConflict (policies are immutable). p.Builtin is not
// sent. Registering BuiltinPolicyID gives the tenant its own "default",
// which tasks naming no policy follow from then on.
func (c *Client) PutPolicy(ctx context.Context, p Policy) (stored *Policy, created bool, err error) {
	p.Builtin = false
	stored = new(Policy)
	status, err := c.do(ctx, http.MethodPost, "/retry-policies", nil, p, stored)
	if err != nil {
		return nil, false, err
	}
	return stored, status == http.StatusCreated, nil
}

// GetPolicy returns one policy. GetPolicy(ctx, BuiltinPolicyID) answers the
// built-in policy (Builtin set) while the tenant has no "default" of its own.
func (c *Client) GetPolicy(ctx context.Context, id string) (*Policy, error) {
	p := new(Policy)
	if _, err := c.do(ctx, http.MethodGet, "/retry-policies/"+url.PathEscape(id), nil, nil, p); err != nil {
		return nil, err
	}
	return p, nil
}

// ListPolicies returns a page of policies, by ID. While the tenant has no
// "default" of its own, the built-in one is listed in its place (Builtin
// set).
func (c *Client) ListPolicies(ctx context.Context, o ListOptions) (*Page[Policy], error) {
	page := new(Page[Policy])
	if _, err := c.do(ctx, http.MethodGet, "/retry-policies", listQuery(o), nil, page); err != nil {
		return nil, err
	}
	return page, nil
}

// CreateTask submits a task. created is false when the request repeats an
// earlier one with the same IdempotencyKey: the task returned is that one.
// The same key with a different request is an *Error matching ErrConflict.
func (c *Client) CreateTask(ctx context.Context, r TaskRequest) (t *Task, created bool, err error) {
	t = new(Task)
	status, err := c.do(ctx, http.MethodPost, "/retry-tasks", nil, r, t)
	if err != nil {
		return nil, false, err
	}
	return t, status == http.StatusCreated, nil
}

// CreateTasks submits up to MaxBatch tasks in one request, which the
// service stores in one durable commit, and returns one TaskResult per
// request, in order. A task the service refuses does not stop the others:
// its refusal is in its TaskResult. err is for the request as a whole (more
// than MaxBatch tasks or none, a body over the service's batch limit, no
// answer): the service then stored none of them, except after an answer
// was lost on its way back, so send the same batch again with
// IdempotencyKeys set to be safe from duplicates.
func (c *Client) CreateTasks(ctx context.Context, rs []TaskRequest) ([]TaskResult, error) {
	var out struct {
		Items []TaskResult `json:"items"`
	}
	in := struct {
		Tasks []TaskRequest `json:"tasks"`
	}{rs}
	if _, err := c.do(ctx, http.MethodPost, "/retry-tasks/batch", nil, in, &out); err != nil {
		return nil, err
	}
	if len(out.Items) != len(rs) {
		return nil, fmt.Errorf("retryd client: %d results for %d tasks", len(out.Items), len(rs))
	}
	for i := range out.Items {
		if e := out.Items[i].Error; e != nil {
			e.StatusCode = out.Items[i].Status
		}
	}
	return out.Items, nil
}

// GetTask returns one task.
func (c *Client) GetTask(ctx context.Context, id string) (*Task, error) {
	return c.task(ctx, http.MethodGet, taskPath(id, ""))
}

// CancelTask cancels a PENDING task, or dismisses a dead letter (EXHAUSTED
// or FAILED), and returns it; a task in another state is an *Error
// matching ErrConflict.
func (c *Client) CancelTask(ctx context.Context, id string) (*Task, error) {
	return c.task(ctx, http.MethodDelete, taskPath(id, ""))
}

// RedriveTask runs an EXHAUSTED or FAILED task again, with fresh attempts
// and the same idempotency key, and returns it; a task in another state is
// an *Error matching ErrConflict.
func (c *Client) RedriveTask(ctx context.Context, id string) (*Task, error) {
	return c.task(ctx, http.MethodPost, taskPath(id, "/redrive"))
}

func (c *Client) task(ctx context.Context, method, path string) (*Task, error) {
	t := new(Task)
	if _, err := c.do(ctx, method, path, nil, nil, t); err != nil {
		return nil, err
	}
	return t, nil
}

// ListTasks returns a page of tasks matching q, newest first.
func (c *Client) ListTasks(ctx context.Context, q TaskQuery) (*Page[Task], error) {
	v := listQuery(q.ListOptions)
	if len(q.Statuses) > 0 {
		s := make([]string, len(q.Statuses))
		for i, st := range q.Statuses {
			s[i] = string(st)
		}
		v.Set("status", strings.Join(s, ","))
	}
	for name, value := range map[string]string{"policyId": q.PolicyID, "targetHost": q.TargetHost,
		"destinationId": q.DestinationID, "idempotencyKey": q.IdempotencyKey, "cause": q.Cause} {
		if value != "" {
			v.Set(name, value)
		}
	}
	return c.tasks(ctx, "/retry-tasks", v)
}

// ListDeadLetters returns a page of EXHAUSTED and FAILED tasks, newest
// first, of policyID (all when empty).
func (c *Client) ListDeadLetters(ctx context.Context, policyID string, o ListOptions) (*Page[Task], error) {
	v := listQuery(o)
	if policyID != "" {
		v.Set("policyId", policyID)
	}
	return c.tasks(ctx, "/dead-letters", v)
}

func (c *Client) tasks(ctx context.Context, path string, v url.Values) (*Page[Task], error) {
	page := new(Page[Task])
	if _, err := c.do(ctx, http.MethodGet, path, v, nil, page); err != nil {
		return nil, err
	}
	return page, nil
}

// ListAttempts returns a page of a task's attempt log, oldest first.
func (c *Client) ListAttempts(ctx context.Context, taskID string, o ListOptions) (*Page[Attempt], error) {
	page := new(Page[Attempt])
	if _, err := c.do(ctx, http.MethodGet, taskPath(taskID, "/attempts"), listQuery(o), nil, page); err != nil {
		return nil, err
	}
	return page, nil
}
