package hostlimit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
)

// Field is the name of a policy's host limiter setting in the policy's
// JSON, beside the fields of retry.Policy's encoding.
const Field = "hostLimiter"

// Setting is what a policy says of the host limiter its tasks pass. The
// zero Setting, a policy that says nothing, is retryd's default: its own
// limiter for each host when it has host limiters on, none when off (see
// Limits.SetOptIn). A Setting is immutable once decoded.
type Setting struct {
	// Off: the policy's tasks are never held back.
	Off bool
	// On: the policy's tasks pass retryd's own limiter for each host even
	// when retryd's default is off. (A Config turns it on too.)
	On bool
	// Config, when not nil, sets up a limiter of the policy's own for each
	// host (shared with the other policies of the same settings): a floor
	// or a ceiling rate, say. Zero fields take retry.LimiterConfig's
	// defaults.
	Config *retry.LimiterConfig
	// spec is Config's canonical JSON, the key that tells settings apart.
	spec string
}

// ParseSetting decodes a policy's hostLimiter field: {"enabled": false}
// turns the limiter off; {} is the default; {"enabled": true} turns
// retryd's own limiter on for the policy's tasks; any other
// field is retry.LimiterConfig's (floor, ceiling, increase, decrease,
// burst, outageShare, queueMs, circuitAfterMs, openForMs) and gives the policy limiters
// of its own. Problems are *retry.FieldError, their Field prefixed with
// "hostLimiter.", joined.
func ParseSetting(raw json.RawMessage) (Setting, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return Setting{}, &retry.FieldError{Field: Field, Reason: "must be an object"}
	}
	enabled, explicit := true, false
	if v, ok := fields["enabled"]; ok {
		delete(fields, "enabled")
		explicit = string(v) != "null"
		if explicit && json.Unmarshal(v, &enabled) != nil {
			return Setting{}, &retry.FieldError{Field: Field + ".enabled", Reason: "must be true or false"}
		}
	}
	if !enabled {
		if len(fields) > 0 {
			return Setting{}, &retry.FieldError{Field: Field, Reason: "a limiter turned off takes no settings"}
		}
		return Setting{Off: true}, nil
	}
	if len(fields) == 0 {
		return Setting{On: explicit}, nil
	}
	rest, _ := json.Marshal(fields)
	c := new(retry.LimiterConfig)
	if err := json.Unmarshal(rest, c); err != nil {
		var errs []error
		for _, fe := range backoff.FieldErrors(err) {
			errs = append(errs, &retry.FieldError{Field: Field + "." + fe.Field, Reason: fe.Reason})
		}
		if len(errs) == 0 {
			return Setting{}, &retry.FieldError{Field: Field, Reason: err.Error()}
		}
		return Setting{}, errors.Join(errs...)
	}
	return withConfig(c)
}

// withConfig returns the Setting of limiters set up by c.
func withConfig(c *retry.LimiterConfig) (Setting, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return Setting{}, fmt.Errorf("hostlimit: encoding a limiter's settings: %w", err)
	}
	return Setting{Config: c, spec: string(b)}, nil
}

// MarshalJSON encodes s as ParseSetting reads it, canonically:
// {"enabled":false}, {} for the default, or the limiter's settings with
// every field's effective value.
func (s Setting) MarshalJSON() ([]byte, error) {
	switch {
	case s.Off:
		return []byte(`{"enabled":false}`), nil
	case s.Config == nil && s.On:
		return []byte(`{"enabled":true}`), nil
	case s.Config == nil:
		return []byte(`{}`), nil
	}
	return []byte(s.spec), nil
}

// IsDefault reports whether s is the zero Setting: retryd's default.
func (s Setting) IsDefault() bool { return !s.Off && !s.On && s.Config == nil }

// optedIn reports whether s asks for a limiter whatever retryd's default.
func (s Setting) optedIn() bool { return s.On || s.Config != nil }

// Split takes the hostLimiter field out of a policy's JSON object: it
// returns the object without it, for retry.Policy's decoder, and the
// Setting it held (the zero Setting without one).
func Split(spec []byte) (rest []byte, s Setting, err error) {
	if !bytes.Contains(spec, []byte(`"`+Field+`"`)) {
		return spec, Setting{}, nil // the common case, without decoding twice
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(spec, &fields); err != nil {
		return nil, Setting{}, fmt.Errorf("retry policy: %w", err)
	}
	raw, ok := fields[Field]
	if !ok {
		return spec, Setting{}, nil
	}
	delete(fields, Field)
	if string(raw) != "null" {
		if s, err = ParseSetting(raw); err != nil {
			return nil, Setting{}, err
		}
	}
	rest, err = json.Marshal(fields)
	if err != nil {
		return nil, Setting{}, fmt.Errorf("retry policy: %w", err)
	}
	return rest, s, nil
}

// Decode decodes a stored policy spec: retry.Policy's encoding, with the
// policy's hostLimiter field when it has one.
func Decode(spec []byte) (*retry.Policy, Setting, error) {
	rest, s, err := Split(spec)
	if err != nil {
		return nil, Setting{}, err
	}
	p := new(retry.Policy)
	if err := json.Unmarshal(rest, p); err != nil {
		return nil, Setting{}, err
	}
	return p, s, nil
}

// Encode returns the canonical spec of a policy p with setting s: p's
// encoding, followed by the hostLimiter field unless s is the default, so
// that a policy saying nothing of it encodes as it did before the field
// existed.
func Encode(p *retry.Policy, s Setting) ([]byte, error) {
	b, err := json.Marshal(p)
	if err != nil || s.IsDefault() {
		return b, err
	}
	h, err := s.MarshalJSON()
	if err != nil {
		return nil, err
	}
	out := append(b[:len(b)-1:len(b)-1], `,"`+Field+`":`...)
	out = append(out, h...)
	return append(out, '}'), nil
}
