package backoff

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"
)

var kindNames = [...]string{Exponential: "EXPONENTIAL", Linear: "LINEAR", Fixed: "FIXED", Custom: "CUSTOM", Schedule: "SCHEDULE"}

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

// ParseKind returns the Kind named s (EXPONENTIAL, LINEAR, FIXED, CUSTOM,
// SCHEDULE).
func ParseKind(s string) (Kind, error) {
	for k, name := range kindNames {
		if s == name {
			return Kind(k), nil
		}
	}
	return 0, fmt.Errorf("unknown value %q (want EXPONENTIAL, LINEAR, FIXED or SCHEDULE)", s)
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
// jitterFactor, and delaysMs for a SCHEDULE and maxDoublings when not 0. Every
// field is written with its effective value (see Effective), None as 0, so two
// policies that behave alike encode alike and decoding the encoding gives a
// policy that behaves as p does. The last two are left out where they do not
// apply, so that a policy that uses neither encodes to the bytes it always
// did and a stored encoding still compares equal. Durations are
// milliseconds, with up to six decimals when they are not whole: exact to the
// nanosecond. A Custom kind or jitter cannot be encoded (a function has no
// JSON), nor can a policy that fails Validate.
func (p Policy) MarshalJSON() ([]byte, error) {
	if p.Kind == Custom || p.Jitter == CustomJitter {
		return nil, errors.New("backoff: a CUSTOM backoff or jitter cannot be encoded as JSON")
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	e := p.Effective()
	b := make([]byte, 0, 192)
	b = append(b, `{"backoff":"`...)
	b = append(b, e.Kind.String()...)
	b = append(b, '"')
	if e.Kind == Schedule {
		b = append(b, `,"delaysMs":[`...)
		for i, d := range e.Delays {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendMs(b, d)
		}
		b = append(b, ']')
	}
	b = appendMsField(b, "initialDelayMs", e.Base)
	b = append(b, `,"multiplier":`...)
	b = strconv.AppendFloat(b, e.Multiplier, 'g', -1, 64)
	if e.MaxDoublings != 0 {
		b = append(b, `,"maxDoublings":`...)
		b = strconv.AppendInt(b, int64(e.MaxDoublings), 10)
	}
	b = appendMsField(b, "incrementMs", e.Increment)
	b = appendMsField(b, "minDelayMs", e.Min)
	b = appendMsField(b, "maxDelayMs", e.Max)
	b = append(b, `,"jitterType":"`...)
	b = append(b, e.Jitter.String()...)
	b = append(b, `","jitterFactor":`...)
	b = strconv.AppendFloat(b, e.JitterFactor, 'g', -1, 64)
	return append(b, '}'), nil
}

// appendMsField appends `,"name":` and d in milliseconds, None as 0.
func appendMsField(b []byte, name string, d time.Duration) []byte {
	b = append(b, `,"`...)
	b = append(b, name...)
	b = append(b, `":`...)
	return appendMs(b, max(d, 0))
}

// appendMs appends d ≥ 0 as a decimal number of milliseconds, exactly: the
// whole milliseconds, then up to six decimals without trailing zeros.
func appendMs(b []byte, d time.Duration) []byte {
	b = strconv.AppendInt(b, int64(d/time.Millisecond), 10)
	ns := int64(d % time.Millisecond)
	if ns == 0 {
		return b
	}
	frac := [7]byte{'.'}
	for i := 6; i > 0; i-- {
		frac[i] = byte('0' + ns%10)
		ns /= 10
	}
	end := 7
	for frac[end-1] == '0' {
		end--
	}
	return append(b, frac[:end]...)
}

// msString returns d as appendMs writes it.
func msString(d time.Duration) string { return string(appendMs(nil, d)) }

// UnmarshalJSON decodes a policy encoded with the service's field names.
// Omitted (or null) fields take their defaults. An explicit 0 means what it
// says: initialDelayMs 0 is Base None (zero delays), incrementMs 0 is
// Increment None (no step), maxDelayMs 0 is Max None (no cap) and minDelayMs 0
// no floor; as a multiplier or a jitterFactor 0 means nothing useful and is
// rejected. maxDoublings 0 means no limit; delaysMs is a list of 1 to
// MaxScheduleDelays milliseconds, and each bad entry is reported with its
// index. Unknown fields, values of the wrong type and values that fail
// Validate are rejected, each as a *FieldError, all at once: FieldErrors lists
// them all. On success p is the decoded policy's Effective form; on error p is
// left unchanged.
func (p *Policy) UnmarshalJSON(data []byte) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return fmt.Errorf("backoff policy: %w", err)
	}
	if fields == nil {
		return errors.New("backoff policy: want a JSON object, got null")
	}
	var q Policy
	var errs []error
	var failed fieldSet
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		raw := fields[name]
		if string(raw) == "null" {
			continue
		}
		f, ok := fieldNamed(name)
		if !ok {
			errs = append(errs, &FieldError{name, "unknown field"})
			continue
		}
		if f == fieldDelays {
			// A list can have a problem per entry; each is reported.
			if bad := q.decodeDelays(raw); len(bad) > 0 {
				errs = append(errs, bad...)
				failed.add(f)
			}
			continue
		}
		if err := q.decodeField(f, raw); err != nil {
			errs = append(errs, &FieldError{name, trimJSONPrefix(err)})
			failed.add(f)
		}
	}
	errs = append(errs, q.problems(failed)...)
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	*p = q.Effective()
	return nil
}

func fieldNamed(name string) (field, bool) {
	for f, n := range fieldNames {
		if n == name {
			return field(f), true
		}
	}
	return 0, false
}

// decodeField sets field f of p from raw, a JSON value other than null, or
// says why it cannot.
func (p *Policy) decodeField(f field, raw json.RawMessage) error {
	var err error
	switch f {
	case fieldBackoff:
		var s string
		if err = json.Unmarshal(raw, &s); err == nil {
			p.Kind, err = ParseKind(s)
			if err == nil && p.Kind == Custom {
				err = errors.New("CUSTOM cannot be decoded: a function has no JSON")
			}
		}
	case fieldJitterType:
		var s string
		if err = json.Unmarshal(raw, &s); err == nil {
			p.Jitter, err = ParseJitter(s)
			if err == nil && p.Jitter == CustomJitter {
				err = errors.New("CUSTOM cannot be decoded: a function has no JSON")
			}
		}
	case fieldInitialDelay:
		p.Base, err = parseMs(raw)
		p.Base = orNone(p.Base)
	case fieldIncrement:
		p.Increment, err = parseMs(raw)
		p.Increment = orNone(p.Increment)
	case fieldMaxDelay:
		p.Max, err = parseMs(raw)
		p.Max = orNone(p.Max)
	case fieldMinDelay:
		p.Min, err = parseMs(raw)
	case fieldMultiplier:
		p.Multiplier, err = parseFloat(raw)
		if err == nil && p.Multiplier < 1 {
			if p.Multiplier == 0 {
				err = errors.New("must be at least 1; omit it for the default, 2")
			} else {
				err = errors.New("must be at least 1")
			}
		}
	case fieldMaxDoublings:
		if json.Unmarshal(raw, &p.MaxDoublings) != nil || p.MaxDoublings < 0 {
			p.MaxDoublings = 0
			err = errors.New("must be a whole number, 0 or more (0 means no limit)")
		}
	case fieldJitterFactor:
		p.JitterFactor, err = parseFloat(raw)
		if err == nil && !(p.JitterFactor > 0 && p.JitterFactor <= 1) {
			if p.JitterFactor == 0 {
				err = errors.New("must be above 0 and at most 1; omit it for 0.1, or use jitterType NONE for no jitter")
			} else {
				err = errors.New("must be above 0 and at most 1")
			}
		}
	}
	return err
}

// decodeDelays sets p.Delays from raw, a JSON list of milliseconds, or
// returns a *FieldError per problem: one for a value that is not a list or is
// too long, one per bad entry, naming its index.
func (p *Policy) decodeDelays(raw json.RawMessage) []error {
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return []error{&FieldError{fieldDelays.String(), "must be a list of milliseconds"}}
	}
	if len(items) > MaxScheduleDelays {
		return []error{&FieldError{fieldDelays.String(), "must list at most " + strconv.Itoa(MaxScheduleDelays) + " delays"}}
	}
	delays := make([]time.Duration, len(items))
	var errs []error
	for i, item := range items {
		d, err := parseMs(item)
		if err != nil {
			errs = append(errs, &FieldError{fieldDelays.String(), "[" + strconv.Itoa(i) + "] " + err.Error()})
		}
		delays[i] = d
	}
	if len(errs) > 0 {
		return errs
	}
	p.Delays = delays
	return nil
}

// parseMs reads a JSON number of milliseconds (fractional, with an exponent or
// not) as a Duration, exactly: the decimal value is rounded to the nearest
// nanosecond, halves up, without passing through a float.
func parseMs(raw []byte) (time.Duration, error) {
	notNumber := errors.New("must be a number")
	i, neg := 0, false
	if i < len(raw) && raw[i] == '-' {
		neg = true
		i++
	}
	// The mantissa's digits, integer part then fraction, without leading zeros.
	var digits []byte
	start, fracDigits := i, 0
	for ; i < len(raw) && isDigit(raw[i]); i++ {
		if len(digits) > 0 || raw[i] != '0' {
			digits = append(digits, raw[i])
		}
	}
	if i == start {
		return 0, notNumber
	}
	if i < len(raw) && raw[i] == '.' {
		i++
		start = i
		for ; i < len(raw) && isDigit(raw[i]); i++ {
			if len(digits) > 0 || raw[i] != '0' {
				digits = append(digits, raw[i])
			}
		}
		fracDigits = i - start
		if fracDigits == 0 {
			return 0, notNumber
		}
	}
	exp := 0
	if i < len(raw) && (raw[i] == 'e' || raw[i] == 'E') {
		i++
		expNeg := false
		if i < len(raw) && (raw[i] == '+' || raw[i] == '-') {
			expNeg = raw[i] == '-'
			i++
		}
		start = i
		for ; i < len(raw) && isDigit(raw[i]); i++ {
			if exp < 1<<30 { // far past any Duration either way
				exp = exp*10 + int(raw[i]-'0')
			}
		}
		if i == start {
			return 0, notNumber
		}
		if expNeg {
			exp = -exp
		}
	}
	if i != len(raw) {
		return 0, notNumber
	}
	if len(digits) == 0 {
		return 0, nil // zero, whatever its sign or exponent
	}
	if neg {
		return 0, errors.New("must not be negative")
	}
	tooLarge := errors.New("must be at most " + msString(maxDuration))
	// The value is digits·10^scale nanoseconds; whole are the digits left of
	// the decimal point once scaled.
	scale := exp - fracDigits + 6
	whole := len(digits) + scale
	if whole > 19 { // at least 10^19 ns: more than a Duration holds
		return 0, tooLarge
	}
	if whole < 0 {
		return 0, nil // below 0.1 ns
	}
	var v uint64
	for k := range whole {
		d := uint64(0) // past the digits, a zero of the scale
		if k < len(digits) {
			d = uint64(digits[k] - '0')
		}
		v = v*10 + d // whole ≤ 19 digits: at most 10^19−1, within a uint64
	}
	if whole < len(digits) && digits[whole] >= '5' {
		v++
	}
	if v > math.MaxInt64 {
		return 0, tooLarge
	}
	return time.Duration(v), nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func parseFloat(raw json.RawMessage) (float64, error) {
	if len(raw) == 0 || !(raw[0] == '-' || isDigit(raw[0])) {
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

// AppendMillis appends d (0 or more) as JSON policies write durations: a
// decimal number of milliseconds, exact to the nanosecond. Package retry
// writes its own duration fields with it, so every field reads alike.
func AppendMillis(b []byte, d time.Duration) []byte { return appendMs(b, max(d, 0)) }

// ParseMillis reads a JSON number of milliseconds as AppendMillis writes it
// (any JSON number is accepted, exact to the nanosecond); a negative or
// out-of-range number is an error.
func ParseMillis(raw []byte) (time.Duration, error) { return parseMs(raw) }
