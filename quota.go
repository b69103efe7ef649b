package retry

import (
	"errors"
	"math"
	"sync/atomic"
)

// Quota is a retry budget shared by many executions, against retry storms:
// a token bucket that each retry draws from and each success refills (as
// gRPC's retry throttling and the AWS SDK's retry quota do). While the
// downstream is healthy, successes keep it full; when most calls fail, it
// empties and executions stop retrying, with ErrQuotaExhausted, until
// successes come back. A Quota is safe for concurrent use and costs one
// atomic operation per success and per retry.
type Quota struct {
	capacity, cost, refill int64 // in milli-tokens
	tokens                 atomic.Int64
}

// Defaults of QuotaConfig.
const (
	DefaultQuotaCapacity      = 100
	DefaultQuotaRetryCost     = 1
	DefaultQuotaSuccessRefill = 0.1
)

// QuotaConfig sizes a Quota. Zero fields take the defaults: a bucket of 100
// tokens, 1 per retry, 0.1 back per success, so that over time at most one
// call in ten is a retry.
type QuotaConfig struct {
	Capacity      float64 // tokens when full; the bucket starts full
	RetryCost     float64 // tokens a retry takes
	SuccessRefill float64 // tokens a success gives back
}

// NewQuota returns a full Quota sized by c.
func NewQuota(c QuotaConfig) (*Quota, error) {
	if c.Capacity == 0 {
		c.Capacity = DefaultQuotaCapacity
	}
	if c.RetryCost == 0 {
		c.RetryCost = DefaultQuotaRetryCost
	}
	if c.SuccessRefill == 0 {
		c.SuccessRefill = DefaultQuotaSuccessRefill
	}
	var errs []error
	for _, f := range []struct {
		name string
		v    float64
	}{{"capacity", c.Capacity}, {"retryCost", c.RetryCost}, {"successRefill", c.SuccessRefill}} {
		if !(f.v > 0 && f.v <= 1e12) {
			errs = append(errs, &FieldError{Field: f.name, Reason: "must be a positive number of tokens, at most 1e12"})
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	q := &Quota{
		capacity: milli(c.Capacity),
		cost:     milli(c.RetryCost),
		refill:   milli(c.SuccessRefill),
	}
	q.tokens.Store(q.capacity)
	return q, nil
}

func milli(f float64) int64 { return max(1, int64(math.Round(f*1000))) }

// Available returns the tokens in the bucket now.
func (q *Quota) Available() float64 { return float64(q.tokens.Load()) / 1000 }

// TryTake takes the cost of one retry and reports whether there was enough.
func (q *Quota) TryTake() bool {
	for {
		t := q.tokens.Load()
		if t < q.cost {
			return false
		}
		if q.tokens.CompareAndSwap(t, t-q.cost) {
			return true
		}
	}
}

// Refill gives back what one success earns, up to the capacity.
func (q *Quota) Refill() {
	for {
		t := q.tokens.Load()
		if t >= q.capacity {
			return
		}
		if q.tokens.CompareAndSwap(t, min(q.capacity, t+q.refill)) {
			return
		}
	}
}
