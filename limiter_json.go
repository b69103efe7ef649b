package retry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/retrykit/retry/backoff"
)

// MarshalJSON encodes c's data, each field with its effective value (the
// default for a zero one): floor, ceiling (0: none), increase, decrease and
// burst and outageShare as numbers, queueMs, circuitAfterMs (-1: no circuit) and openForMs
// as milliseconds. Overload and Rand are code, not data, and are left out.
// A durable service keeps a limiter's settings with each of its policies
// this way; the Limiter itself, being state shared by the calls to one
// dependency, is no part of a Policy's JSON.
func (c LimiterConfig) MarshalJSON() ([]byte, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	d := c.withDefaults()
	var b bytes.Buffer
	num := func(name string, v float64) {
		b.WriteString(`"` + name + `":` + strconv.FormatFloat(v, 'g', -1, 64) + `,`)
	}
	b.WriteByte('{')
	num("floor", d.Floor)
	num("ceiling", d.Ceiling)
	num("increase", d.Increase)
	num("decrease", d.Decrease)
	num("burst", d.Burst)
	num("outageShare", d.OutageShare)
	b.WriteString(`"queueMs":`)
	b.Write(backoff.AppendMillis(nil, d.Queue))
	b.WriteString(`,"circuitAfterMs":`)
	if d.CircuitAfter < 0 {
		b.WriteString("-1")
	} else {
		b.Write(backoff.AppendMillis(nil, d.CircuitAfter))
	}
	b.WriteString(`,"openForMs":`)
	b.Write(backoff.AppendMillis(nil, d.OpenFor))
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON decodes c as MarshalJSON writes it. Omitted or null fields
// take their defaults; unknown fields, wrong types and invalid values are
// rejected, each problem a *FieldError. On error c is left unchanged; on
// success Overload and Rand are kept as they were.
func (c *LimiterConfig) UnmarshalJSON(data []byte) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return fmt.Errorf("limiter: %w", err)
	}
	if fields == nil {
		return errors.New("limiter: want a JSON object, got null")
	}
	q := LimiterConfig{Overload: c.Overload, Rand: c.Rand}
	var errs []error
	bad := func(field, reason string) { errs = append(errs, &FieldError{Field: field, Reason: reason}) }
	nums := map[string]*float64{"floor": &q.Floor, "ceiling": &q.Ceiling, "increase": &q.Increase,
		"decrease": &q.Decrease, "burst": &q.Burst, "outageShare": &q.OutageShare}
	durs := map[string]*time.Duration{"queueMs": &q.Queue, "openForMs": &q.OpenFor}
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		raw := fields[name]
		if string(raw) == "null" {
			continue
		}
		switch {
		case nums[name] != nil:
			if json.Unmarshal(raw, nums[name]) != nil {
				bad(name, "must be a number")
			}
		case durs[name] != nil:
			d, err := backoff.ParseMillis(raw)
			if err != nil {
				bad(name, "must be a number of milliseconds, 0 or more")
			}
			*durs[name] = d
		case name == "circuitAfterMs":
			var ms float64
			if json.Unmarshal(raw, &ms) != nil {
				bad(name, "must be a number of milliseconds, or -1 for no circuit")
				continue
			}
			if ms < 0 {
				q.CircuitAfter = -1
				continue
			}
			d, err := backoff.ParseMillis(raw)
			if err != nil {
				bad(name, "must be a number of milliseconds, or -1 for no circuit")
			}
			q.CircuitAfter = d
		default:
			bad(name, "unknown field")
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := q.validate(); err != nil {
		return err
	}
	*c = q
	return nil
}

// withDefaults returns c with every zero field set to its default.
func (c LimiterConfig) withDefaults() LimiterConfig {
	set := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	set(&c.Floor, DefaultLimiterFloor)
	set(&c.Increase, DefaultLimiterIncrease)
	set(&c.Decrease, DefaultLimiterDecrease)
	set(&c.Burst, DefaultLimiterBurst)
	if c.Queue == 0 {
		c.Queue = DefaultLimiterQueue
	}
	if c.CircuitAfter == 0 {
		c.CircuitAfter = DefaultLimiterCircuitAfter
	} else if c.CircuitAfter < 0 {
		c.CircuitAfter = -1
	}
	if c.OpenFor == 0 {
		c.OpenFor = DefaultLimiterOpenFor
	}
	if c.OutageShare == 0 {
		c.OutageShare = DefaultLimiterOutageShare
	}
	return c
}
