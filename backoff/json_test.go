package backoff_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry/backoff"
)

func TestJSONRoundTrip(t *testing.T) {
	t.Parallel()
	tests := map[string]backoff.Policy{
		"exponential full": {Base: 100 * time.Millisecond, Multiplier: 2, Max: 30 * time.Second},
		"linear equal":     {Kind: backoff.Linear, Base: time.Second, Increment: 1500 * time.Microsecond, Jitter: backoff.EqualJitter, Min: time.Millisecond, Max: time.Minute},
		"fixed none":       {Kind: backoff.Fixed, Base: 250 * time.Millisecond, Jitter: backoff.NoJitter},
		"proportional":     {Kind: backoff.Fixed, Base: time.Second, Jitter: backoff.ProportionalJitter, JitterFactor: 0.25},
		"decorrelated":     {Base: 5 * time.Millisecond, Max: 2 * time.Second, Jitter: backoff.DecorrelatedJitter},
		"no cap":           {Base: time.Second, Multiplier: 1.5},
		"sub-millisecond":  {Base: 1234567 * time.Nanosecond, Max: 3 * time.Millisecond},
	}
	for name, p := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			data, err := json.Marshal(p)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			var got backoff.Policy
			if err := json.Unmarshal(data, &got); err != nil {
				t.Fatalf("Unmarshal(%s): %v", data, err)
			}
			again, err := json.Marshal(got)
			if err != nil || string(again) != string(data) {
				t.Errorf("round trip of %s encodes as %s, %v", data, again, err)
			}
			for n := 1; n <= 12; n++ {
				if a, b := p.Delay(n, 0, fixedSource(1<<62)), got.Delay(n, 0, fixedSource(1<<62)); a != b {
					t.Errorf("Delay(%d): %v before the round trip, %v after", n, a, b)
				}
			}
		})
	}
}

// TestJSONIsCanonical: policies that behave alike encode alike, so a stored
// encoding can be compared byte for byte.
func TestJSONIsCanonical(t *testing.T) {
	t.Parallel()
	alike := []string{`{}`, `{"multiplier":0,"jitterFactor":0}`, `{"multiplier":2,"incrementMs":100,"jitterFactor":0.1}`}
	var first string
	for _, input := range alike {
		var p backoff.Policy
		if err := json.Unmarshal([]byte(input), &p); err != nil {
			t.Fatal(err)
		}
		data, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if first == "" {
			first = string(data)
		} else if string(data) != first {
			t.Errorf("%s encodes as %s, want %s", input, data, first)
		}
	}
}

func TestJSONFieldNames(t *testing.T) {
	t.Parallel()
	data, err := json.Marshal(backoff.Policy{Kind: backoff.Linear, Base: time.Second, Increment: 2 * time.Second, Max: time.Minute, Jitter: backoff.EqualJitter})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"backoff":"LINEAR","initialDelayMs":1000,"multiplier":2,"incrementMs":2000,"minDelayMs":0,"maxDelayMs":60000,"jitterType":"EQUAL","jitterFactor":0.1}`
	if got := string(data); got != want {
		t.Errorf("Marshal = %s\nwant      %s", got, want)
	}
}

func TestJSONOmittedFieldsTakeDefaults(t *testing.T) {
	t.Parallel()
	var got backoff.Policy
	if err := json.Unmarshal([]byte(`{"jitterType":"NONE"}`), &got); err != nil {
		t.Fatal(err)
	}
	want := backoff.Default()
	want.Jitter = backoff.NoJitter
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if err := json.Unmarshal([]byte(`{"maxDelayMs":0,"multiplier":null}`), &got); err != nil {
		t.Fatal(err)
	}
	if got.Max != 0 || got.Multiplier != backoff.DefaultMultiplier {
		t.Errorf("explicit maxDelayMs 0 and null multiplier gave Max %v, Multiplier %v; want no cap and the default", got.Max, got.Multiplier)
	}
}

func TestJSONRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		input      string
		wantFields []string
	}{
		{"unknown field", `{"initialDelay":100}`, []string{"initialDelay"}},
		{"lower-case enum", `{"backoff":"exponential"}`, []string{"backoff"}},
		{"unknown jitter", `{"jitterType":"SOME"}`, []string{"jitterType"}},
		{"custom backoff", `{"backoff":"CUSTOM"}`, []string{"backoff"}},
		{"negative delay", `{"initialDelayMs":-1}`, []string{"initialDelayMs"}},
		{"string delay", `{"initialDelayMs":"100"}`, []string{"initialDelayMs"}},
		{"huge delay", `{"maxDelayMs":1e300}`, []string{"maxDelayMs"}},
		{"multiplier below 1", `{"multiplier":0.5}`, []string{"multiplier"}},
		{"factor above 1", `{"jitterType":"PROPORTIONAL","jitterFactor":1.5}`, []string{"jitterFactor"}},
		{"min above max", `{"minDelayMs":5000,"maxDelayMs":1000}`, []string{"minDelayMs"}},
		{"decorrelated from zero", `{"jitterType":"DECORRELATED","initialDelayMs":0}`, []string{"initialDelayMs"}},
		{"every problem at once", `{"backoff":"X","initialDelayMs":-5,"jitterType":"Y","bogus":true}`, []string{"backoff", "bogus", "initialDelayMs", "jitterType"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			before := backoff.Policy{Kind: backoff.Fixed, Base: time.Second}
			got := before
			err := json.Unmarshal([]byte(tt.input), &got)
			if err == nil {
				t.Fatalf("Unmarshal(%s) = nil, want an error", tt.input)
			}
			var fields []string
			for _, fe := range backoff.FieldErrors(err) {
				fields = append(fields, fe.Field)
			}
			slices.Sort(fields)
			if !slices.Equal(fields, tt.wantFields) {
				t.Errorf("fields in error = %v, want %v (error: %v)", fields, tt.wantFields, err)
			}
			if !reflect.DeepEqual(got, before) {
				t.Errorf("a failed Unmarshal changed the policy to %+v", got)
			}
		})
	}
}

func TestJSONRejectsNonObjects(t *testing.T) {
	t.Parallel()
	for _, input := range []string{`null`, `[]`, `"FIXED"`, `{"backoff":"FIXED"`, `{} {}`} {
		var p backoff.Policy
		if err := json.Unmarshal([]byte(input), &p); err == nil {
			t.Errorf("Unmarshal(%s) = nil, want an error", input)
		}
	}
}

func TestMarshalRefusesFunctions(t *testing.T) {
	t.Parallel()
	p := backoff.Policy{Kind: backoff.Custom, Func: func(int) time.Duration { return time.Second }}
	if _, err := json.Marshal(p); err == nil || !strings.Contains(err.Error(), "CUSTOM") {
		t.Errorf("Marshal of a custom policy: err = %v, want one naming CUSTOM", err)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		policy backoff.Policy
		want   []string // fields, in order
	}{
		{"zero is valid", backoff.Policy{}, nil},
		{"default is valid", backoff.Default(), nil},
		{"unknown kind", backoff.Policy{Kind: 42}, []string{"backoff"}},
		{"custom without func", backoff.Policy{Kind: backoff.Custom}, []string{"backoff"}},
		{"negatives", backoff.Policy{Base: -1, Increment: -1, Min: -1, Max: -1}, []string{"initialDelayMs", "incrementMs", "minDelayMs", "maxDelayMs"}},
		{"multiplier below 1", backoff.Policy{Multiplier: 0.9}, []string{"multiplier"}},
		{"multiplier NaN", backoff.Policy{Multiplier: nan()}, []string{"multiplier"}},
		{"min above max", backoff.Policy{Min: 2, Max: 1}, []string{"minDelayMs"}},
		{"unknown jitter", backoff.Policy{Jitter: -1}, []string{"jitterType"}},
		{"custom jitter without func", backoff.Policy{Jitter: backoff.CustomJitter}, []string{"jitterType"}},
		{"factor out of range", backoff.Policy{JitterFactor: 1.01}, []string{"jitterFactor"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.policy.Validate()
			var got []string
			for _, fe := range backoff.FieldErrors(err) {
				got = append(got, fe.Field)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Validate fields = %v, want %v (%v)", got, tt.want, err)
			}
			var fe *backoff.FieldError
			if (err != nil) != errors.As(err, &fe) {
				t.Errorf("errors.As(*FieldError) disagrees with err = %v", err)
			}
		})
	}
}

func nan() float64 { var z float64; return z / z }

func FuzzUnmarshalJSON(f *testing.F) {
	for _, seed := range []string{
		`{}`, `{"backoff":"LINEAR","initialDelayMs":10,"incrementMs":5}`,
		`{"jitterType":"PROPORTIONAL","jitterFactor":0.3}`, `{"maxDelayMs":0}`,
		`{"initialDelayMs":1.5e3,"multiplier":3}`, `{"minDelayMs":1e20}`, `[1]`, `{"a":`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var p backoff.Policy
		if err := json.Unmarshal(data, &p); err != nil {
			return
		}
		// Whatever decodes is valid, computes sane delays and survives a round trip.
		if err := p.Validate(); err != nil {
			t.Fatalf("decoded an invalid policy from %q: %v", data, err)
		}
		for _, n := range []int{1, 2, 100, 1 << 40} {
			if d := p.Delay(n, 0, nil); d < 0 || (p.Max > 0 && d > p.Max) {
				t.Fatalf("Delay(%d) = %v for %q", n, d, data)
			}
		}
		again, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("Marshal after Unmarshal(%q): %v", data, err)
		}
		var q backoff.Policy
		if err := json.Unmarshal(again, &q); err != nil {
			t.Fatalf("Unmarshal(%s): %v", again, err)
		}
		if third, err := json.Marshal(q); err != nil || string(third) != string(again) {
			t.Fatalf("encoding is not canonical: %s, then %s (%v)", again, third, err)
		}
	})
}
