package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/service/hostlimit"
	"github.com/retrykit/retry/service/store"
)

// Sizes of a policy preview: the samples when the request names none, and
// at most. A preview lists at most maxPreviewAttempts attempts, and keeps
// samples × attempts within maxPreviewPoints by taking fewer samples of a
// policy with many attempts, which bounds its memory and time (some 20 ms
// and 16 MB at the bound).
const (
	DefaultPreviewSamples = 2000
	MaxPreviewSamples     = 20000
	maxPreviewAttempts    = 1000
	maxPreviewPoints      = 1_000_000
)

// previewSeed seeds the preview's jitter, so that the same request answers
// the same numbers.
const previewSeed = 0x5eed

// errPreview is the failure every simulated attempt ends in: retryable,
// with no hint, so that the policy's backoff alone decides.
var errPreview = errors.New("preview: a failed attempt")

// percentiles of a duration, in milliseconds.
type percentiles struct {
	P5  float64 `json:"p5"`
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
}

// previewAttempt is one attempt of a preview: the wait before it, the time
// waited before it in all (over the samples that reached it), and the
// fraction of samples that reached it.
type previewAttempt struct {
	Attempt      int         `json:"attempt"`
	DelayMs      percentiles `json:"delayMs"`
	CumulativeMs percentiles `json:"cumulativeMs"`
	Reached      float64     `json:"reached"`
}

// preview is the answer of POST /retry-policies/preview.
type preview struct {
	MaxAttempts int              `json:"maxAttempts"`
	BudgetMs    float64          `json:"budgetMs"`
	Samples     int              `json:"samples"`
	Attempts    []previewAttempt `json:"attempts"`
}

// policyPreview answers what a policy does to a task that keeps failing,
// from the decision engine itself (retry.Policy.Decide) run many times.
func (s *server) policyPreview(w http.ResponseWriter, r *http.Request, tenant string) error {
	data, err := s.readBody(w, r, s.maxBody)
	if err != nil {
		return err
	}
	p, samples, id, err := parsePreview(data)
	if err != nil {
		return err
	}
	if id != "" {
		stored, _, err := store.LookupPolicy(r.Context(), s.store, tenant, id)
		if errors.Is(err, store.ErrNotFound) {
			return errorf(http.StatusBadRequest, CodeUnknownPolicy, "policyId", "no policy %q is registered", id)
		}
		if err != nil {
			return storeError(err, "policy")
		}
		dec, _, err := hostlimit.Decode(stored.Spec)
		if err != nil {
			return fmt.Errorf("decoding stored policy %q: %w", id, err)
		}
		p = *dec
	}
	s.writeJSON(w, http.StatusOK, simulate(p, samples))
	return nil
}

// parsePreview checks {"policyId"} or {"policy"} (exactly one) and
// "samples".
func parsePreview(data []byte) (p retry.Policy, samples int, id string, err error) {
	m, err := parseObject(data)
	if err != nil {
		return p, 0, "", err
	}
	f := &fields{m: m}
	f.unknown("policyId", "policy", "samples")
	id, _ = f.check("policyId", false, checkPolicyID)
	raw, hasPolicy := f.raw("policy")
	_, hasID := f.raw("policyId")
	switch {
	case hasID && hasPolicy:
		f.bad("policy", "give policyId or policy, not both")
	case !hasID && !hasPolicy:
		f.bad("policyId", "give policyId (a registered policy) or policy (its settings)")
	case hasPolicy:
		p = previewSpec(f, raw)
	}
	samples = DefaultPreviewSamples
	if raw, ok := f.raw("samples"); ok {
		if json.Unmarshal(raw, &samples) != nil || samples < 1 || samples > MaxPreviewSamples {
			f.bad("samples", fmt.Sprintf("must be a whole number from 1 to %d", MaxPreviewSamples))
		}
	}
	return p, samples, id, f.err()
}

// previewSpec decodes the policy member as POST /retry-policies takes a
// policy, its policyId optional and unused; its problems are named
// "policy.<field>".
func previewSpec(f *fields, raw json.RawMessage) retry.Policy {
	var p retry.Policy
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		f.bad("policy", "must be an object: a policy's settings, as POST /retry-policies takes them")
		return p
	}
	delete(m, "policyId")
	delete(m, hostlimit.Field) // when an attempt may go is no part of what the policy's delays are
	rest, _ := json.Marshal(m)
	if err := json.Unmarshal(rest, &p); err != nil {
		for _, pr := range policyProblems(err) {
			field := "policy"
			if pr.Field != "" {
				field += "." + pr.Field
			}
			f.bad(field, pr.Message)
		}
	}
	return p
}

// simulate runs p's decision step for samples executions of a task whose
// every attempt fails (retryably, with no hint), each attempt taking the
// policy's expected call time, and summarises the waits by attempt.
func simulate(p retry.Policy, samples int) *preview {
	p.Rand = rand.New(rand.NewPCG(previewSeed, previewSeed))
	p.Quota = nil
	attempts := min(p.Attempts(), maxPreviewAttempts)
	samples = max(1, min(samples, maxPreviewPoints/attempts))
	// delays[a][i] and cum[a][i]: sample i's wait before attempt a+1, and
	// all it waited before it, for the samples that reached it.
	delays := make([][]float64, attempts)
	cum := make([][]float64, attempts)
	start := time.Unix(0, 0)
	for range samples {
		now, prev, total := start, time.Duration(0), 0.0
		delays[0] = append(delays[0], 0)
		cum[0] = append(cum[0], 0)
		for a := 1; a < attempts; a++ {
			now = now.Add(p.CallTime)
			v := p.Decide(&retry.Failure{Err: errPreview, Class: retry.Retry, Attempt: a, PrevDelay: prev,
				Start: start, Now: now, Call: p.CallTime})
			if v.Stop != nil {
				break
			}
			prev = v.PrevDelay
			// Without a budget the clock is not read, and delays of a
			// policy without a cap could carry it past time.Time's range.
			if p.Budget > 0 {
				now = now.Add(v.Delay)
			}
			d := ms(v.Delay)
			total += d
			delays[a] = append(delays[a], d)
			cum[a] = append(cum[a], total)
		}
	}
	out := &preview{MaxAttempts: p.Attempts(), BudgetMs: ms(p.Budget), Samples: samples,
		Attempts: make([]previewAttempt, 0, attempts)}
	for a := range attempts {
		out.Attempts = append(out.Attempts, previewAttempt{
			Attempt: a + 1, DelayMs: percentilesOf(delays[a]), CumulativeMs: percentilesOf(cum[a]),
			Reached: float64(len(delays[a])) / float64(samples),
		})
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// percentilesOf returns the 5th, 50th and 95th percentiles of xs, linearly
// interpolated between the nearest ranks; zeros for none. xs is sorted.
func percentilesOf(xs []float64) percentiles {
	if len(xs) == 0 {
		return percentiles{}
	}
	slices.Sort(xs)
	at := func(q float64) float64 {
		pos := q * float64(len(xs)-1)
		lo := int(math.Floor(pos))
		hi := min(lo+1, len(xs)-1)
		return xs[lo] + (xs[hi]-xs[lo])*(pos-float64(lo))
	}
	return percentiles{P5: at(0.05), P50: at(0.50), P95: at(0.95)}
}
