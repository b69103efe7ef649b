package retry

import (
	"bytes"
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
// once, share it between goroutines, copy it to vary a field. Every zero
// field takes its default, field by field, so the zero Policy is usable:
// DefaultMaxAttempts calls, backoff.Default() delays, every error but a
// Permanent one retried, no time budget. An invalid Policy (see Validate)
// is an error before any call.
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
	// 0 means no budget. With one, op's context carries its end as a
	// deadline.
	Budget time.Duration
	// CallTime is the expected duration of one call, used to decide whether
	// another attempt fits in Budget; 0 means "as long as the previous one".
	CallTime time.Duration
	// AttemptTimeout, when positive, gives each call a deadline of its own;
	// a call it cuts short is retried.
	AttemptTimeout time.Duration
	// MaxRetryAfter caps a server's hint (RetryAfter) when there is no
	// Budget; 0 means DefaultMaxRetryAfter. With a Budget, the budget is the
	// limit: a hint that does not fit it stops the execution.
	MaxRetryAfter time.Duration
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
	// Limiter, when set, decides when each attempt may go, the first
	// included: Do waits for it (within Budget and the caller's deadline,
	// else it stops with ErrLimited or ErrCircuitOpen) and reports each
	// attempt's outcome to it. Share one Limiter between the executions
	// that call one dependency; see Limiter.
	Limiter *Limiter

	// Name names the operation in logs and events.
	Name string
	// Observer, when set, hears the end of every attempt (see Event), from
	// the goroutine that runs the execution.
	Observer Observer
	// Logger, when set, logs every attempt through Log(Logger).
	Logger *slog.Logger

	// Clock reads the time and sleeps; nil means the real clock. Tests pass a
	// fake (see package retrytest).
	Clock Clock
	// Rand supplies jitter's randomness; nil means a source safe for
	// concurrent use that needs no seeding. A Policy shared between
	// goroutines needs a Rand that is safe for concurrent use too: wrap a
	// seeded math/rand/v2 generator with backoff.Locked.
	Rand backoff.Source
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
	if p.MaxAttempts >= 0 && p.Budget >= 0 && p.CallTime >= 0 && p.AttemptTimeout >= 0 &&
		p.MaxRetryAfter >= 0 && p.RetryableStatusCodes == nil {
		// The common case, on the path of every execution: no allocation.
		return p.Backoff.Validate()
	}
	errs := []error{p.Backoff.Validate()}
	bad := func(field, reason string) { errs = append(errs, &FieldError{Field: field, Reason: reason}) }
	if p.MaxAttempts < 0 {
		bad("maxAttempts", "must not be negative")
	}
	for _, f := range [...]struct {
		name string
		d    time.Duration
	}{{"totalBudgetMs", p.Budget}, {"callTimeMs", p.CallTime}, {"attemptTimeoutMs", p.AttemptTimeout}, {"maxRetryAfterMs", p.MaxRetryAfter}} {
		if f.d < 0 {
			bad(f.name, "must not be negative")
		}
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
// totalBudgetMs, callTimeMs, attemptTimeoutMs, maxRetryAfterMs and
// retryableStatusCodes, each with its effective value (0 for no budget, no
// expected call time, no attempt timeout). Durations are milliseconds,
// fractional when not whole, so every value round-trips. Funcs, hooks, the
// quota, the limiter and the clock are code or shared state, not data, and
// are left out.
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
	writeMs(&buf, "totalBudgetMs", p.Budget)
	writeMs(&buf, "callTimeMs", p.CallTime)
	writeMs(&buf, "attemptTimeoutMs", p.AttemptTimeout)
	writeMs(&buf, "maxRetryAfterMs", p.maxRetryAfter())
	buf.WriteString(`,"retryableStatusCodes":`)
	buf.Write(cs)
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// UnmarshalJSON decodes a policy with the service's field names. Omitted or
// null fields take their defaults; unknown fields, wrong types and invalid
// values are rejected, every problem of every field a *FieldError (list
// them with backoff.FieldErrors). On error p is left unchanged; on success
// the fields that are code (Classifier, hooks, Clock, …) are kept as they
// were.
func (p *Policy) UnmarshalJSON(data []byte) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return fmt.Errorf("retry policy: %w", err)
	}
	if fields == nil {
		return errors.New("retry policy: want a JSON object, got null")
	}
	q := *p
	q.MaxAttempts, q.Budget, q.CallTime, q.AttemptTimeout, q.MaxRetryAfter, q.RetryableStatusCodes = 0, 0, 0, 0, 0, nil
	var errs []error
	bad := func(field, reason string) { errs = append(errs, &FieldError{Field: field, Reason: reason}) }
	ms := map[string]*time.Duration{"totalBudgetMs": &q.Budget, "callTimeMs": &q.CallTime,
		"attemptTimeoutMs": &q.AttemptTimeout, "maxRetryAfterMs": &q.MaxRetryAfter}
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		raw := fields[name]
		isNull := string(raw) == "null"
		if d, ok := ms[name]; ok {
			if !isNull {
				var err error
				if *d, err = parseMs(raw); err != nil {
					bad(name, err.Error())
				}
			}
			delete(fields, name)
			continue
		}
		switch name {
		case "maxAttempts":
			if !isNull && (json.Unmarshal(raw, &q.MaxAttempts) != nil || q.MaxAttempts < 1) {
				bad(name, "must be a whole number of at least 1")
			}
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
	// Report the range problems of the fields that did parse, too.
	q.Backoff = backoff.Policy{}
	for _, fe := range backoff.FieldErrors(q.Validate()) {
		if !slices.ContainsFunc(backoff.FieldErrors(errors.Join(errs...)), func(e *FieldError) bool { return e.Field == fe.Field }) {
			errs = append(errs, fe)
		}
	}
	return errors.Join(errs...)
}

// writeMs writes ,"name":ms as backoff writes its durations.
func writeMs(b *bytes.Buffer, name string, d time.Duration) {
	b.WriteString(`,"` + name + `":`)
	b.Write(backoff.AppendMillis(nil, d))
}

// parseMs reads a JSON number of milliseconds, 0 or more.
func parseMs(raw json.RawMessage) (time.Duration, error) {
	d, err := backoff.ParseMillis(raw)
	if err != nil || d < 0 {
		return 0, errors.New("must be a number of milliseconds, 0 or more")
	}
	return d, nil
}
