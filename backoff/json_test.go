package backoff_test

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
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
		"no cap":           {Base: time.Second, Multiplier: 1.5, Max: backoff.None},
		"default cap":      {Base: time.Second, Multiplier: 1.5},
		"sub-millisecond":  {Base: 1234567 * time.Nanosecond, Max: 3 * time.Millisecond},
		"nanoseconds":      {Base: time.Nanosecond, Increment: 3, Min: 1, Max: math.MaxInt64, Kind: backoff.Linear},
		"zero policy":      {},
		"multiplier alone": {Multiplier: 3},
		"no jitter alone":  {Jitter: backoff.NoJitter},
		"no base":          {Kind: backoff.Fixed, Base: backoff.None, Jitter: backoff.NoJitter},
		"negative base":    {Base: -time.Hour},
		"no increment":     {Kind: backoff.Linear, Base: time.Second, Increment: backoff.None},
		"min, default max": {Min: 5 * time.Second},
		"schedule":         {Kind: backoff.Schedule, Delays: []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, 5 * time.Minute}, Max: time.Hour},
		"schedule jitter":  {Kind: backoff.Schedule, Delays: []time.Duration{0, 1500 * time.Microsecond, 7}, Jitter: backoff.EqualJitter, Min: time.Microsecond},
		"schedule decorr.": {Kind: backoff.Schedule, Base: time.Second, Delays: []time.Duration{2 * time.Second}, Jitter: backoff.DecorrelatedJitter},
		"max doublings":    {Base: 10 * time.Second, Max: 300 * time.Second, MaxDoublings: 3},
		"max doublings×3":  {Base: time.Millisecond, Multiplier: 3, MaxDoublings: 70, Max: backoff.None, Jitter: backoff.NoJitter},
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
			if !reflect.DeepEqual(got, p.Effective()) {
				t.Errorf("decoded %+v, want %+v", got, p.Effective())
			}
			a, b := rand.NewPCG(3, 4), rand.NewPCG(3, 4)
			var prevA, prevB time.Duration
			for n := 1; n <= 70; n++ {
				prevA, prevB = p.Delay(n, prevA, a), got.Delay(n, prevB, b)
				if prevA != prevB {
					t.Errorf("Delay(%d): %v before the round trip, %v after", n, prevA, prevB)
				}
			}
		})
	}
}

// TestJSONIsCanonical: policies that behave alike encode alike, so a stored
// encoding can be compared byte for byte.
func TestJSONIsCanonical(t *testing.T) {
	t.Parallel()
	alike := []string{
		`{}`, `{"multiplier":null,"jitterFactor":null}`, `{"multiplier":2,"incrementMs":100,"jitterFactor":0.1}`,
		`{"backoff":"EXPONENTIAL","initialDelayMs":100,"minDelayMs":0,"maxDelayMs":30000,"jitterType":"FULL"}`,
		`{"initialDelayMs":1e2,"maxDelayMs":3.0e4,"minDelayMs":-0}`,
	}
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
	for _, p := range []backoff.Policy{{}, backoff.Default(), {Increment: 100 * time.Millisecond, JitterFactor: 0.1}, {Multiplier: 2, Max: 30 * time.Second}} {
		if data, err := json.Marshal(p); err != nil || string(data) != first {
			t.Errorf("%+v encodes as %s (%v), want %s", p, data, err, first)
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
	want := backoff.Policy{Base: 100 * time.Millisecond, Multiplier: 2, Increment: 100 * time.Millisecond, Max: 30 * time.Second, Jitter: backoff.NoJitter, JitterFactor: 0.1}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if err := json.Unmarshal([]byte(`{"maxDelayMs":0,"multiplier":null}`), &got); err != nil {
		t.Fatal(err)
	}
	if got.Max != backoff.None || got.Multiplier != backoff.DefaultMultiplier {
		t.Errorf("explicit maxDelayMs 0 and null multiplier gave Max %v, Multiplier %v; want None (no cap) and the default", got.Max, got.Multiplier)
	}
}

// TestJSONZeroIsNone: an explicit 0 in JSON means zero (None in Go) for the
// fields where zero means something, and None encodes as 0.
func TestJSONZeroIsNone(t *testing.T) {
	t.Parallel()
	tests := []struct {
		input  string
		policy backoff.Policy // the Go policy that says the same
		delays []time.Duration
	}{
		{`{"backoff":"FIXED","initialDelayMs":0,"jitterType":"NONE"}`, backoff.Policy{Kind: backoff.Fixed, Base: backoff.None, Jitter: backoff.NoJitter}, []time.Duration{0, 0, 0}},
		{`{"backoff":"LINEAR","initialDelayMs":0,"incrementMs":5,"jitterType":"NONE"}`, backoff.Policy{Kind: backoff.Linear, Base: backoff.None, Increment: 5 * time.Millisecond, Jitter: backoff.NoJitter}, []time.Duration{0, 5 * time.Millisecond, 10 * time.Millisecond}},
		{`{"backoff":"LINEAR","initialDelayMs":40,"incrementMs":0,"jitterType":"NONE"}`, backoff.Policy{Kind: backoff.Linear, Base: 40 * time.Millisecond, Increment: backoff.None, Jitter: backoff.NoJitter}, []time.Duration{40 * time.Millisecond, 40 * time.Millisecond, 40 * time.Millisecond}},
		{`{"initialDelayMs":20000,"maxDelayMs":0,"jitterType":"NONE"}`, backoff.Policy{Base: 20 * time.Second, Max: backoff.None, Jitter: backoff.NoJitter}, []time.Duration{20 * time.Second, 40 * time.Second, 80 * time.Second}},
		{`{"initialDelayMs":20000,"jitterType":"NONE"}`, backoff.Policy{Base: 20 * time.Second, Jitter: backoff.NoJitter}, []time.Duration{20 * time.Second, 30 * time.Second, 30 * time.Second}},
	}
	for _, tt := range tests {
		var got backoff.Policy
		if err := json.Unmarshal([]byte(tt.input), &got); err != nil {
			t.Errorf("Unmarshal(%s): %v", tt.input, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.policy.Effective()) {
			t.Errorf("Unmarshal(%s) = %+v, want %+v", tt.input, got, tt.policy.Effective())
		}
		for i, want := range tt.delays {
			if d := got.Delay(i+1, 0, nil); d != want {
				t.Errorf("%s: Delay(%d) = %v, want %v", tt.input, i+1, d, want)
			}
		}
		fromGo, err := json.Marshal(tt.policy)
		if err != nil {
			t.Fatal(err)
		}
		fromJSON, err := json.Marshal(got)
		if err != nil || string(fromJSON) != string(fromGo) {
			t.Errorf("%s encodes as %s (%v), the Go policy as %s", tt.input, fromJSON, err, fromGo)
		}
	}
	data, err := json.Marshal(backoff.Policy{Base: backoff.None, Increment: backoff.None, Max: backoff.None})
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"initialDelayMs":0,`, `"incrementMs":0,`, `"maxDelayMs":0,`} {
		if !strings.Contains(string(data), field) {
			t.Errorf("None encodes as %s, want %s in it", data, field)
		}
	}
}

// TestJSONMillisecondsAreExact: durations travel as decimal milliseconds
// exactly, to the nanosecond, from 1ns to the longest Duration; decoding
// rounds finer values to the nearest nanosecond, halves up.
func TestJSONMillisecondsAreExact(t *testing.T) {
	t.Parallel()
	durations := []time.Duration{1, 999_999, time.Millisecond, 1_234_567, 1_000_001, 1<<53 + 1, 1<<62 + 7, math.MaxInt64 - 1, math.MaxInt64}
	src := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		durations = append(durations, time.Duration(src.Int64()), time.Duration(src.Int64N(int64(time.Hour))), time.Duration(src.Int64N(1e7)))
	}
	for _, d := range durations {
		data, err := json.Marshal(backoff.Policy{Kind: backoff.Fixed, Base: d, Max: backoff.None})
		if err != nil {
			t.Fatal(err)
		}
		var got backoff.Policy
		if err := json.Unmarshal(data, &got); err != nil || got.Base != d {
			t.Fatalf("%d ns encodes as %s, which decodes as %d ns (%v)", d, data, got.Base, err)
		}
	}
	decodes := []struct {
		ms   string
		want time.Duration
	}{
		{"0", 0},
		{"-0", 0},
		{"0.000001", 1},
		{"0.0000005", 1},
		{"0.00000049999", 0},
		{"1e-400", 0},
		{"0e400", 0},
		{"1.5e3", 1500 * time.Millisecond},
		{"1234.5678901", 1234567890},
		{"1234.5678905", 1234567891},
		{"2E+2", 200 * time.Millisecond},
		{"100000e-5", time.Millisecond},
		{"9223372036854.775807", math.MaxInt64},
		{"9223372036854.7758074999", math.MaxInt64},
		{"9.223372036854775807e12", math.MaxInt64},
	}
	for _, tt := range decodes {
		var got backoff.Policy
		input := `{"minDelayMs":` + tt.ms + `,"maxDelayMs":0}`
		if err := json.Unmarshal([]byte(input), &got); err != nil || got.Min != tt.want {
			t.Errorf("minDelayMs %s decodes as %d ns (%v), want %d", tt.ms, got.Min, err, tt.want)
		}
	}
	for _, ms := range []string{"9223372036854.775808", "9223372036854.7758075", "1e19", "1e400", "-1e-400", "-0.0000001"} {
		var got backoff.Policy
		err := json.Unmarshal([]byte(`{"minDelayMs":`+ms+`,"maxDelayMs":0}`), &got)
		if fes := backoff.FieldErrors(err); len(fes) != 1 || fes[0].Field != "minDelayMs" {
			t.Errorf("minDelayMs %s: err = %v, want one about minDelayMs", ms, err)
		}
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
		{"min above default max", `{"minDelayMs":31000}`, []string{"minDelayMs"}},
		{"min above bad max", `{"minDelayMs":5000,"maxDelayMs":-1}`, []string{"maxDelayMs"}},
		{"decorrelated from zero", `{"jitterType":"DECORRELATED","initialDelayMs":0}`, []string{"initialDelayMs"}},
		{"decorrelated from bad base", `{"jitterType":"DECORRELATED","initialDelayMs":"0"}`, []string{"initialDelayMs"}},
		{"multiplier zero", `{"multiplier":0}`, []string{"multiplier"}},
		{"multiplier negative", `{"multiplier":-2}`, []string{"multiplier"}},
		{"factor zero", `{"jitterType":"PROPORTIONAL","jitterFactor":0}`, []string{"jitterFactor"}},
		{"factor zero without proportional", `{"jitterFactor":0}`, []string{"jitterFactor"}},
		{"factor negative", `{"jitterFactor":-0.5}`, []string{"jitterFactor"}},
		{"every problem at once", `{"backoff":"X","initialDelayMs":-5,"jitterType":"Y","bogus":true}`, []string{"backoff", "bogus", "initialDelayMs", "jitterType"}},
		{"parse and range problems together", `{"initialDelayMs":-5,"multiplier":0.5,"jitterFactor":2}`, []string{"initialDelayMs", "jitterFactor", "multiplier"}},
		{"schedule without delays", `{"backoff":"SCHEDULE"}`, []string{"delaysMs"}},
		{"schedule of none", `{"backoff":"SCHEDULE","delaysMs":[]}`, []string{"delaysMs"}},
		{"schedule of too many", `{"backoff":"SCHEDULE","delaysMs":[` + strings.Repeat("1,", backoff.MaxScheduleDelays) + `1]}`, []string{"delaysMs"}},
		{"schedule negative entries", `{"backoff":"SCHEDULE","delaysMs":[1,-2,"3"]}`, []string{"delaysMs", "delaysMs"}},
		{"schedule not a list", `{"backoff":"SCHEDULE","delaysMs":1000}`, []string{"delaysMs"}},
		{"delays without schedule", `{"backoff":"FIXED","delaysMs":[1000]}`, []string{"delaysMs"}},
		{"delays with a bad backoff", `{"backoff":"SCHEDULES","delaysMs":[1000]}`, []string{"backoff"}},
		{"max doublings negative", `{"maxDoublings":-1}`, []string{"maxDoublings"}},
		{"max doublings fractional", `{"maxDoublings":1.5}`, []string{"maxDoublings"}},
		{"max doublings a string", `{"maxDoublings":"3"}`, []string{"maxDoublings"}},
		{"max doublings not exponential", `{"backoff":"LINEAR","maxDoublings":3}`, []string{"maxDoublings"}},
		{"parse and cross-field problems together", `{"backoff":3,"minDelayMs":40000,"jitterType":"DECORRELATED","initialDelayMs":0}`, []string{"backoff", "initialDelayMs", "minDelayMs"}},
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

// TestJSONZeroReasons: an explicit 0 where 0 means nothing says what to write
// instead.
func TestJSONZeroReasons(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		`{"multiplier":0}`: "multiplier: must be at least 1; omit it for the default, 2",
		`{"jitterType":"PROPORTIONAL","jitterFactor":0}`: "jitterFactor: must be above 0 and at most 1; omit it for 0.1, or use jitterType NONE for no jitter",
	}
	for input, want := range tests {
		var p backoff.Policy
		if err := json.Unmarshal([]byte(input), &p); err == nil || err.Error() != want {
			t.Errorf("Unmarshal(%s) = %v, want %q", input, err, want)
		}
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
		{"negatives are None but for Min", backoff.Policy{Base: -1, Increment: -1, Min: -1, Max: -1}, []string{"minDelayMs"}},
		{"None", backoff.Policy{Base: backoff.None, Increment: backoff.None, Max: backoff.None}, nil},
		{"multiplier below 1", backoff.Policy{Multiplier: 0.9}, []string{"multiplier"}},
		{"multiplier negative", backoff.Policy{Multiplier: -2}, []string{"multiplier"}},
		{"multiplier 1", backoff.Policy{Multiplier: 1}, nil},
		{"multiplier NaN", backoff.Policy{Multiplier: nan()}, []string{"multiplier"}},
		{"multiplier infinite", backoff.Policy{Multiplier: math.Inf(1)}, []string{"multiplier"}},
		{"min above max", backoff.Policy{Min: 2, Max: 1}, []string{"minDelayMs"}},
		{"min 5s, max 1s", backoff.Policy{Min: 5 * time.Second, Max: time.Second}, []string{"minDelayMs"}},
		{"min under the default max", backoff.Policy{Min: 5 * time.Second}, nil},
		{"min at the default max", backoff.Policy{Min: 30 * time.Second}, nil},
		{"min above the default max", backoff.Policy{Min: 31 * time.Second}, []string{"minDelayMs"}},
		{"min with no cap", backoff.Policy{Min: time.Hour, Max: backoff.None}, nil},
		{"decorrelated from the default base", backoff.Policy{Jitter: backoff.DecorrelatedJitter}, nil},
		{"decorrelated from no base", backoff.Policy{Base: backoff.None, Jitter: backoff.DecorrelatedJitter}, []string{"initialDelayMs"}},
		{"unknown jitter", backoff.Policy{Jitter: -1}, []string{"jitterType"}},
		{"custom jitter without func", backoff.Policy{Jitter: backoff.CustomJitter}, []string{"jitterType"}},
		{"factor out of range", backoff.Policy{JitterFactor: 1.01}, []string{"jitterFactor"}},
		{"factor negative", backoff.Policy{JitterFactor: -0.1}, []string{"jitterFactor"}},
		{"factor NaN", backoff.Policy{JitterFactor: nan()}, []string{"jitterFactor"}},
		{"every problem", backoff.Policy{Kind: 9, Multiplier: 0.5, Min: -1, Jitter: 9, JitterFactor: 2}, []string{"backoff", "multiplier", "minDelayMs", "jitterType", "jitterFactor"}},
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

// FuzzUnmarshalJSON: decoding never panics, and whatever decodes is valid,
// computes sane delays and survives a round trip unchanged.
func FuzzUnmarshalJSON(f *testing.F) {
	for _, seed := range []string{
		`{}`, `{"backoff":"LINEAR","initialDelayMs":10,"incrementMs":5}`,
		`{"jitterType":"PROPORTIONAL","jitterFactor":0.3}`, `{"maxDelayMs":0}`,
		`{"initialDelayMs":1.5e3,"multiplier":3}`, `{"minDelayMs":1e20}`, `[1]`, `{"a":`,
		`{"initialDelayMs":0,"incrementMs":0,"backoff":"LINEAR"}`, `{"minDelayMs":0.0000005,"maxDelayMs":9223372036854.775807}`,
		`{"initialDelayMs":-5,"multiplier":0.5,"jitterFactor":2}`, `{"minDelayMs":1e-99999999999}`,
		`{"backoff":"SCHEDULE","delaysMs":[1000,5000.5,3e4]}`, `{"delaysMs":[]}`, `{"backoff":"SCHEDULE","delaysMs":[-1,"x"]}`,
		`{"maxDoublings":3,"initialDelayMs":10000,"maxDelayMs":300000}`, `{"maxDoublings":1e3}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var p backoff.Policy
		if err := json.Unmarshal(data, &p); err != nil {
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("decoded an invalid policy from %q: %v", data, err)
		}
		for _, n := range []int{1, 2, 100, 10_000, 1 << 40} {
			if d := p.Delay(n, 0, nil); d < 0 || (p.Max > 0 && d > p.Max) || d < p.Min {
				t.Fatalf("Delay(%d) = %v for %q", n, d, data)
			}
		}
		checkRoundTrip(t, p)
	})
}

// FuzzPolicyJSON: for every valid policy that has no functions, decoding its
// encoding gives a policy that behaves identically (the same delays from the
// same seeded source), is p's Effective form, and encodes to the same bytes.
func FuzzPolicyJSON(f *testing.F) {
	f.Add(uint8(0), uint8(0), int64(0), 0.0, int64(0), int64(0), int64(0), 0.0)
	f.Add(uint8(1), uint8(4), int64(time.Second), 1.5, int64(-1), int64(time.Millisecond), int64(-1), 0.3)
	f.Add(uint8(2), uint8(3), int64(1234567), 3.0, int64(7), int64(1), int64(math.MaxInt64), 1.0)
	f.Add(uint8(0), uint8(1), int64(-1), 2.0, int64(0), int64(31*time.Second), int64(0), 0.0)
	f.Add(uint8(1), uint8(2), int64(math.MaxInt64), 1e300, int64(math.MaxInt64), int64(0), int64(1), 5e-324)
	f.Fuzz(func(t *testing.T, kind, jitter uint8, base int64, mult float64, inc, minD, maxD int64, factor float64) {
		p := backoff.Policy{
			Kind: backoff.Kind(kind % 4), Jitter: backoff.Jitter(jitter % 6),
			Base: time.Duration(base), Multiplier: mult, Increment: time.Duration(inc),
			Min: time.Duration(minD), Max: time.Duration(maxD), JitterFactor: factor,
		}
		data, err := json.Marshal(p)
		if p.Kind == backoff.Custom || p.Jitter == backoff.CustomJitter || p.Validate() != nil {
			if err == nil {
				t.Fatalf("%+v is invalid or custom, yet encodes as %s", p, data)
			}
			return
		}
		if err != nil {
			t.Fatalf("Marshal(%+v): %v", p, err)
		}
		checkRoundTrip(t, p)
	})
}

// checkRoundTrip checks decode(encode(p)) against p: same behaviour, p's
// Effective form, and byte-identical when encoded again.
func checkRoundTrip(t *testing.T, p backoff.Policy) {
	t.Helper()
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatalf("Marshal(%+v): %v", p, err)
	}
	var q backoff.Policy
	if err := json.Unmarshal(data, &q); err != nil {
		t.Fatalf("Unmarshal(%s): %v", data, err)
	}
	if !reflect.DeepEqual(q, p.Effective()) {
		t.Fatalf("%+v encodes as %s, which decodes as %+v, not %+v", p, data, q, p.Effective())
	}
	a, b := rand.NewPCG(1, 2), rand.NewPCG(1, 2)
	var prevA, prevB time.Duration
	for _, n := range []int{1, 2, 3, 4, 5, 8, 13, 21, 34, 55, 64, 65, 89, 1000, 10_000} {
		prevA, prevB = p.Delay(n, prevA, a), q.Delay(n, prevB, b)
		if prevA != prevB {
			t.Fatalf("%s: Delay(%d) = %v before the round trip, %v after", data, n, prevA, prevB)
		}
	}
	if again, err := json.Marshal(q); err != nil || string(again) != string(data) {
		t.Fatalf("encoding is not canonical: %s, then %s (%v)", data, again, err)
	}
}
