package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
)

// MaxBulkLimit is the most tasks one RedriveTasks or CancelTasks changes.
const MaxBulkLimit = 1000

// BulkFilter selects the tasks RedriveTasks and CancelTasks change. Every
// field is optional; the ones set must all match.
//
// Statuses narrows the states: for a redrive, within EXHAUSTED and FAILED
// (both when empty); for a cancel, within the states a single cancel
// accepts, PENDING (the default). TargetHost is a target's host[:port], as
// in its URL, in any case. Cause is a dead letter's cause, as
// DeadLetterCauses and Task.Cause name it. Limit caps the tasks one call
// changes: 0 means the service's default, 500, and it may be at most
// MaxBulkLimit.
type BulkFilter struct {
	Statuses   []Status `json:"status,omitempty"`
	PolicyID   string   `json:"policyId,omitempty"`
	TargetHost string   `json:"targetHost,omitempty"`
	Cause      string   `json:"cause,omitempty"`
	Limit      int      `json:"limit,omitempty"`
}

// BulkResult is the answer to one bulk call: Count tasks changed, and
// whether More may still match the filter.
type BulkResult struct {
	Count int  `json:"count"`
	More  bool `json:"more"`
}

// RedriveTasks redrives up to f.Limit dead letters matching f, each as
// RedriveTask would, in one call. A redriven task leaves the filter, so
// calling again with the same f goes on where this call stopped, until
// More is false; RedriveAll does that. A task that changed state while the
// call ran is skipped, not an error.
func (c *Client) RedriveTasks(ctx context.Context, f BulkFilter) (BulkResult, error) {
	return c.bulk(ctx, "/retry-tasks/redrive", f)
}

// CancelTasks cancels up to f.Limit tasks matching f, each as CancelTask
// would, in one call; see RedriveTasks for how to go on, and CancelAll.
func (c *Client) CancelTasks(ctx context.Context, f BulkFilter) (BulkResult, error) {
	return c.bulk(ctx, "/retry-tasks/cancel", f)
}

// RedriveAll calls RedriveTasks with f until no more tasks match (or a call
// changes none, as when others keep changing the same tasks), calling
// progress, when not nil, with the number redriven so far after each call.
// It returns that number, also when a call fails.
func (c *Client) RedriveAll(ctx context.Context, f BulkFilter, progress func(done int)) (int, error) {
	return c.bulkAll(ctx, "/retry-tasks/redrive", f, progress)
}

// CancelAll calls CancelTasks with f until no more tasks match, as
// RedriveAll does.
func (c *Client) CancelAll(ctx context.Context, f BulkFilter, progress func(done int)) (int, error) {
	return c.bulkAll(ctx, "/retry-tasks/cancel", f, progress)
}

func (c *Client) bulk(ctx context.Context, path string, f BulkFilter) (BulkResult, error) {
	var out BulkResult
	_, err := c.do(ctx, http.MethodPost, path, nil, f, &out)
	return out, err
}

func (c *Client) bulkAll(ctx context.Context, path string, f BulkFilter, progress func(done int)) (int, error) {
	done := 0
	for {
		r, err := c.bulk(ctx, path, f)
		if err != nil {
			return done, err
		}
		done += r.Count
		if progress != nil {
			progress(done)
		}
		// A call that changed nothing but says more may match would say
		// so again: the matching tasks are changing under it.
		if !r.More || r.Count == 0 {
			return done, nil
		}
		if err := ctx.Err(); err != nil {
			return done, fmt.Errorf("retryd client: %w", err)
		}
	}
}

// Causes is the dead-letter list grouped by cause, the largest group first.
// Scanned is how many dead letters were read; Truncated says the service
// stopped at its bound before the end, so the counts are of the newest
// Scanned only.
type Causes struct {
	Items     []CauseGroup `json:"items"`
	Scanned   int          `json:"scanned"`
	Truncated bool         `json:"truncated"`
}

// CauseGroup is the dead letters of one cause: how many, the first and last
// FinishedAt among them, and the last response status and error of one of
// them, as an example.
type CauseGroup struct {
	Cause       string `json:"cause"`
	Count       int    `json:"count"`
	FirstSeenAt Millis `json:"firstSeenAt"`
	LastSeenAt  Millis `json:"lastSeenAt"`
	LastStatus  int    `json:"lastStatus,omitempty"`
	Example     string `json:"example,omitempty"`
}

// DeadLetterCauses groups the dead letters (EXHAUSTED and FAILED tasks) of
// policyID (all when empty) by cause: a response status ("HTTP 503"), or a
// class of error ("timeout", "connection refused", "connection reset",
// "DNS", "TLS", "lease expired", "target not allowed", "body unavailable",
// "other error"). Pass a cause to BulkFilter.Cause or TaskQuery.Cause to act
// on its tasks.
func (c *Client) DeadLetterCauses(ctx context.Context, policyID string) (*Causes, error) {
	v := url.Values{}
	if policyID != "" {
		v.Set("policyId", policyID)
	}
	out := new(Causes)
	if _, err := c.do(ctx, http.MethodGet, "/dead-letters/causes", v, nil, out); err != nil {
		return nil, err
	}
	return out, nil
}
