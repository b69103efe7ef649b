package backoff

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"
)

var kindNames = [...]string{Exponential: "EXPONENTIAL", Linear: "LINEAR", Fixed: "FIXED", Custom: "CUSTOM"}

var jitterNames = [...]string{
	FullJitter: "FULL", NoJitter: "NONE", EqualJitter: "EQUAL",
	DecorrelatedJitter: "DECORRELATED", ProportionalJitter: "PROPORTIONAL", CustomJitter: "CUSTOM",
}

// String returns the kind's JSON name, such as EXPONENTIAL.
func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// String returns the jitter's JSON name, such as FULL.
func (j Jitter) String() string {
	if j >= 0 && int(j) < len(jitterNames) {
		return jitterNames[j]
	}
	return "Jitter(" + strconv.Itoa(int(j)) + ")"
}

// ParseKind returns the Kind named s (EXPONENTIAL, LINEAR, FIXED, CUSTOM).
func ParseKind(s string) (Kind, error) {
	for k, name := range kindNames {
		if s == name {
			return Kind(k), nil
		}
	}
	return 0, fmt.Errorf("unknown value %q (want EXPONENTIAL, LINEAR or FIXED)", s)
}

// ParseJitter returns the Jitter named s (FULL, NONE, EQUAL, DECORRELATED,
// PROPORTIONAL, CUSTOM).
func ParseJitter(s string) (Jitter, error) {
	for j, name := range jitterNames {
		if s == name {
			return Jitter(j), nil
		}
	}
	return 0, fmt.Errorf("unknown value %q (want NONE, FULL, EQUAL, DECORRELATED or PROPORTIONAL)", s)
}

// MarshalJSON encodes p with the service's field names: backoff,
// initialDelayMs, multiplier, incrementMs, minDelayMs, maxDelayMs, jitterType,
// jitterFactor. The encoding is canonical: every field is written with its
// effective value (the zero Policy as Default(), a zero Multiplier as
// DefaultMultiplier, a zero Increment as Base, a zero JitterFactor as
// DefaultJitterFactor), so two policies that behave alike encode alike.
// Durations are milliseconds, fractional when they are not whole. A Custom
// kind or jitter cannot be encoded: a function has no JSON.
func (p Policy) MarshalJSON() ([]byte, error) {
	if p.IsZero() {
		p = Default()
	}
	if p.Multiplier == 0 {
		p.Multiplier = DefaultMultiplier
	}
	if p.Increment == 0 {
		p.Increment = p.Base
	}
	if p.JitterFactor == 0 {
		p.JitterFactor = DefaultJitterFactor
	}
	if p.Kind == Custom || p.Jitter == CustomJitter {
		return nil, errors.New("backoff: a CUSTOM backoff or jitter cannot be encoded as JSON")
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(`{"backoff":"` + p.Kind.String() + `"`)
	writeMs(&b, "initialDelayMs", p.Base)
	b.WriteString(`,"multiplier":` + strconv.FormatFloat(p.Multiplier, 'g', -1, 64))
	writeMs(&b, "incrementMs", p.Increment)
	writeMs(&b, "minDelayMs", p.Min)
	writeMs(&b, "maxDelayMs", p.Max)
	b.WriteString(`,"jitterType":"` + p.Jitter.String() + `"`)
	b.WriteString(`,"jitterFactor":` + strconv.FormatFloat(p.JitterFactor, 'g', -1, 64) + "}")
	return b.Bytes(), nil
}

func writeMs(b *bytes.Buffer, name string, d time.Duration) {
	b.WriteString(`,"` + name + `":`)
	if d%time.Millisecond == 0 {
		b.WriteString(strconv.FormatInt(int64(d/time.Millisecond), 10))
		return
	}
	b.WriteString(strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', -1, 64))
}

// UnmarshalJSON decodes a policy encoded with the service's field names.
// Omitted (or null) fields take the values of Default(); an explicit
// maxDelayMs of 0 means no cap. Unknown fields, values of the wrong type and
// values that fail Validate are rejected; every problem is reported as a
// *FieldError, so FieldErrors lists them all. On error p is left unchanged.
func (p *Policy) UnmarshalJSON(data []byte) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return fmt.Errorf("backoff policy: %w", err)
	}
	if fields == nil {
		return errors.New("backoff policy: want a JSON object, got null")
	}
	q := Default()
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{field, fmt.Sprintf(format, args...)})
	}
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		raw := fields[name]
		if string(raw) == "null" {
			continue
		}
		var err error
		switch name {
		case "backoff":
			var s string
			if err = json.Unmarshal(raw, &s); err == nil {
				q.Kind, err = ParseKind(s)
				if err == nil && q.Kind == Custom {
					err = errors.New("CUSTOM cannot be decoded: a function has no JSON")
				}
			}
		case "jitterType":
			var s string
			if err = json.Unmarshal(raw, &s); err == nil {
				q.Jitter, err = ParseJitter(s)
				if err == nil && q.Jitter == CustomJitter {
					err = errors.New("CUSTOM cannot be decoded: a function has no JSON")
				}
			}
		case "initialDelayMs":
			q.Base, err = parseMs(raw)
		case "incrementMs":
			q.Increment, err = parseMs(raw)
		case "minDelayMs":
			q.Min, err = parseMs(raw)
		case "maxDelayMs":
			q.Max, err = parseMs(raw)
		case "multiplier":
			q.Multiplier, err = parseFloat(raw)
		case "jitterFactor":
			q.JitterFactor, err = parseFloat(raw)
		default:
			err = errors.New("unknown field")
		}
		if err != nil {
			bad(name, "%s", trimJSONPrefix(err))
		}
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

// parseMs reads a JSON number of milliseconds, possibly fractional.
func parseMs(raw json.RawMessage) (time.Duration, error) {
	f, err := parseFloat(raw)
	if err != nil {
		return 0, err
	}
	if f < 0 {
		return 0, errors.New("must not be negative")
	}
	if f > float64(maxMillis) {
		return 0, fmt.Errorf("must be at most %d", maxMillis)
	}
	return time.Duration(math.Round(f * float64(time.Millisecond))), nil
}

func parseFloat(raw json.RawMessage) (float64, error) {
	if len(raw) == 0 || !(raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') {
		return 0, errors.New("must be a number")
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, errors.New("must be a finite number")
	}
	return f, nil
}

func trimJSONPrefix(err error) string {
	s := err.Error()
	if len(s) > 6 && s[:6] == "json: " {
		return s[6:]
	}
	return s
}
