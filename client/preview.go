package client

import (
	"context"
	"fmt"
	"net/http"

	"github.com/retrykit/retry"
)

// MaxPreviewSamples is the most samples PreviewPolicy may ask for.
const MaxPreviewSamples = 20000

// PreviewRequest asks PreviewPolicy about a policy: a registered one by
// PolicyID (the built-in for BuiltinPolicyID, unless the tenant has its
// own), or Policy's settings, which need not be registered; exactly one of
// the two. Samples is how many executions are simulated: 0 means the
// service's default, 2,000, and it may be at most MaxPreviewSamples.
type PreviewRequest struct {
	PolicyID string        `json:"policyId,omitempty"`
	Policy   *retry.Policy `json:"policy,omitempty"`
	Samples  int           `json:"samples,omitempty"`
}

// Preview is what a policy does to a task that keeps failing, from the
// service's decision engine run Samples times: for each attempt after the
// first, how long it waits and has waited, and how often it is made at all.
// BudgetMs is the policy's time budget, 0 for none.
type Preview struct {
	MaxAttempts int              `json:"maxAttempts"`
	BudgetMs    float64          `json:"budgetMs"`
	Samples     int              `json:"samples"`
	Attempts    []PreviewAttempt `json:"attempts"`
}

// PreviewAttempt is one attempt of a Preview. DelayMs is the wait before
// it, CumulativeMs the time waited in all before it (both over the samples
// that reached it; 0 for attempt 1), and Reached the fraction of samples
// in which the policy allowed it: below 1 when the time budget cuts some
// executions short.
type PreviewAttempt struct {
	Attempt      int         `json:"attempt"`
	DelayMs      Percentiles `json:"delayMs"`
	CumulativeMs Percentiles `json:"cumulativeMs"`
	Reached      float64     `json:"reached"`
}

// Percentiles are the 5th, 50th and 95th percentiles of a duration, in
// milliseconds.
type Percentiles struct {
	P5  float64 `json:"p5"`
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
}

// PreviewPolicy samples the delays of a policy, by its ID or its settings
// (see PreviewRequest), without creating anything.
func (c *Client) PreviewPolicy(ctx context.Context, r PreviewRequest) (*Preview, error) {
	if (r.PolicyID == "") == (r.Policy == nil) {
		return nil, errNoPreviewPolicy
	}
	out := new(Preview)
	if _, err := c.do(ctx, http.MethodPost, "/retry-policies/preview", nil, r, out); err != nil {
		return nil, err
	}
	return out, nil
}

// errNoPreviewPolicy is PreviewPolicy's refusal of a request naming no
// policy, or two, before anything is sent.
var errNoPreviewPolicy = fmt.Errorf("retryd client: a PreviewRequest needs PolicyID or Policy, not both: %w", ErrInvalid)
