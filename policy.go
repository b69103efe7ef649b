package retry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/retrykit/retry/backoff"
)

// DefaultMaxAttempts is the number of calls a Policy with MaxAttempts 0 makes.
const DefaultMaxAttempts = 3

// DefaultRetryableStatusCodes returns the HTTP statuses retried when a Policy
// names none: 408, 425, 429, 500, 502, 503 and 504. Each call returns a new
// slice.
func DefaultRetryableStatusCodes() []int { return []int{408, 425, 429, 500, 502, 503, 504} }

// FieldError is one problem with one field of a policy, named as in JSON.
type FieldError = backoff.FieldError

// Policy says how an operation is retried. It is a plain value: build it
// once, share it between goroutines, copy it to vary a field. The zero Policy
// is usable: DefaultMaxAttempts calls, backoff.Default() delays, every error
// but a Permanent one retried, no time budget.
//
// Slices, funcs and pointers in a Policy are shared by its copies; do not
// change what they point to once the Policy is in use.
type Policy struct {
	// Backoff computes the delay before each retry; the zero value is
	// backoff.Default().
	Backoff backoff.Policy
	// MaxAttempts caps the calls, the first included; 0 means
	// DefaultMaxAttempts.
	MaxAttempts int
	// Budget caps the time from the first call to the end of the last one;
	// 0 means no budget.
	Budget time.Duration
	// CallTime is the expected duration of one call, used to decide whether
	// another attempt fits in Budget; 0 means "as long as the previous one".
	CallTime time.Duration
	// RetryableStatusCodes lists the HTTP statuses worth retrying, for errors
	// that carry one (HTTPStatusCode() int); nil means
	// DefaultRetryableStatusCodes.
	RetryableStatusCodes []int
	// Classifier decides which errors are retried. With none, every error is
	// retried but Permanent ones and those that classify themselves as not
	// retryable; with one, errors it leaves Unknown are not retried unless
	// they classify themselves.
	Classifier Classifier
	// Quota, when set, is a retry budget shared between executions: each retry
	// takes from it, each success refills it, and an empty quota stops
	// retries with ErrQuotaExhausted.
	Quota *Quota

	// Name names the operation in logs and hooks.
	Name string
	// OnRetry, when set, is called before each wait, from the goroutine that
	// called Do.
	OnRetry func(ctx context.Context, a Attempt)
	// Logger, when set, logs each failed attempt at Warn (a cancelled one at
	// Info): "attempt 1/3 failed; retrying in 182ms".
	Logger *slog.Logger

	// Clock reads the time and sleeps; nil means the real clock. Tests pass a
	// fake (see package retrytest).
	Clock Clock
	// Rand supplies jitter's randomness; nil means a source safe for
	// concurrent use that needs no seeding.
	Rand backoff.Source
}

// Attempt describes a failed attempt that is about to be retried, as handed
// to Policy.OnRetry.
type Attempt struct {
	Name        string        // Policy.Name
	Number      int           // the attempt that failed, 1 for the first call
	MaxAttempts int           // the cap on attempts
	Err         error         // what it returned
	Delay       time.Duration // the wait before the next attempt
	Elapsed     time.Duration // time since the first call began; 0 without a Budget
}

// Attempts returns the effective cap on calls.
func (p *Policy) Attempts() int {
	if p.MaxAttempts <= 0 {
		return DefaultMaxAttempts
	}
	return p.MaxAttempts
}

// RetryableStatus reports whether the HTTP status code is one the policy
// retries.
func (p *Policy) RetryableStatus(code int) bool {
	if p.RetryableStatusCodes == nil {
		switch code {
		case 408, 425, 429, 500, 502, 503, 504:
			return true
		}
		return false
	}
	return slices.Contains(p.RetryableStatusCodes, code)
}

// Validate reports every problem with p as a *FieldError, joined; nil means p
// is usable. Field names are the JSON ones.
func (p *Policy) Validate() error {
	errs := []error{p.Backoff.Validate()}
	bad := func(field, reason string) { errs = append(errs, &FieldError{Field: field, Reason: reason}) }
	if p.MaxAttempts < 0 {
		bad("maxAttempts", "must not be negative")
	}
	if p.Budget < 0 {
		bad("totalBudgetMs", "must not be negative")
	}
	if p.CallTime < 0 {
		bad("callTimeMs", "must not be negative")
	}
	for i, c := range p.RetryableStatusCodes {
		if c < 100 || c > 599 {
			bad("retryableStatusCodes", fmt.Sprintf("[%d] = %d is not an HTTP status (100–599)", i, c))
		}
	}
	return errors.Join(errs...)
}

// MarshalJSON encodes the policy's data with the service's field names: the
// backoff's fields (see backoff.Policy.MarshalJSON) and maxAttempts,
// totalBudgetMs and retryableStatusCodes, each with its effective value.
// Funcs, hooks, the quota and the clock are code, not data, and are left out.
func (p Policy) MarshalJSON() ([]byte, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(p.Backoff)
	if err != nil {
		return nil, err
	}
	codes := p.RetryableStatusCodes
	if codes == nil {
		codes = DefaultRetryableStatusCodes()
	}
	cs, _ := json.Marshal(codes)
	var buf bytes.Buffer
	buf.Write(b[:len(b)-1])
	buf.WriteString(`,"maxAttempts":` + strconv.Itoa(p.Attempts()))
	buf.WriteString(`,"totalBudgetMs":` + strconv.FormatInt(p.Budget.Milliseconds(), 10))
	buf.WriteString(`,"retryableStatusCodes":`)
	buf.Write(cs)
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// UnmarshalJSON decodes a policy with the service's field names. Omitted or
// null fields take their defaults; unknown fields, wrong types and invalid
// values are rejected, each problem a *FieldError (list them with
// backoff.FieldErrors). On error p is left unchanged; on success the fields
// that are code (Classifier, hooks, Clock, …) are kept as they were.
func (p *Policy) UnmarshalJSON(data []byte) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return fmt.Errorf("retry policy: %w", err)
	}
	if fields == nil {
		return errors.New("retry policy: want a JSON object, got null")
	}
	q := *p
	q.MaxAttempts, q.Budget, q.RetryableStatusCodes = 0, 0, nil
	var errs []error
	bad := func(field, reason string) { errs = append(errs, &FieldError{Field: field, Reason: reason}) }
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		raw := fields[name]
		isNull := string(raw) == "null"
		switch name {
		case "maxAttempts":
			if !isNull && (json.Unmarshal(raw, &q.MaxAttempts) != nil || q.MaxAttempts < 1) {
				bad(name, "must be a whole number of at least 1")
			}
		case "totalBudgetMs":
			var ms int64
			if !isNull && (json.Unmarshal(raw, &ms) != nil || ms < 0 || ms > maxMillis) {
				bad(name, "must be a whole number of milliseconds, 0 (no budget) or more")
			}
			q.Budget = time.Duration(ms) * time.Millisecond
		case "retryableStatusCodes":
			if !isNull && json.Unmarshal(raw, &q.RetryableStatusCodes) != nil {
				bad(name, "must be a list of whole numbers")
			}
			if q.RetryableStatusCodes == nil && !isNull {
				q.RetryableStatusCodes = []int{}
			}
		default:
			continue
		}
		delete(fields, name)
	}
	rest, _ := json.Marshal(fields)
	if err := json.Unmarshal(rest, &q.Backoff); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		if err := q.Validate(); err != nil {
			return err
		}
		*p = q
		return nil
	}
	return errors.Join(errs...)
}

const maxMillis = int64(^uint64(0)>>1) / int64(time.Millisecond)
