package retry_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
)

func TestPolicyJSON(t *testing.T) {
	t.Parallel()
	p := retry.Policy{
		MaxAttempts:          7,
		Budget:               90 * time.Second,
		CallTime:             1500 * time.Microsecond,
		AttemptTimeout:       3 * time.Second,
		MaxRetryAfter:        2 * time.Minute,
		RetryableStatusCodes: []int{429, 503},
		Backoff:              backoff.Policy{Kind: backoff.Linear, Base: 200 * time.Millisecond, Multiplier: 2, Increment: 200 * time.Millisecond, Max: 10 * time.Second, Jitter: backoff.EqualJitter, JitterFactor: 0.1},
	}
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"backoff":"LINEAR","initialDelayMs":200,"multiplier":2,"incrementMs":200,"minDelayMs":0,"maxDelayMs":10000,"jitterType":"EQUAL","jitterFactor":0.1,"maxAttempts":7,"totalBudgetMs":90000,"callTimeMs":1.5,"attemptTimeoutMs":3000,"maxRetryAfterMs":120000,"retryableStatusCodes":[429,503]}`
	if string(data) != want {
		t.Errorf("Marshal = %s\nwant      %s", data, want)
	}
	var got retry.Policy
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, p) {
		t.Errorf("round trip = %+v, want %+v", got, p)
	}
}

func TestPolicyJSONDefaults(t *testing.T) {
	t.Parallel()
	var got retry.Policy
	if err := json.Unmarshal([]byte(`{}`), &got); err != nil {
		t.Fatal(err)
	}
	want := retry.Policy{Backoff: backoff.Default()}
	if a, b := mustJSON(t, got), mustJSON(t, want); a != b {
		t.Errorf("{} decodes to %s, want %s", a, b)
	}
	data, _ := json.Marshal(retry.Policy{})
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if got.Attempts() != retry.DefaultMaxAttempts || !slices.Equal(got.RetryableStatusCodes, retry.DefaultRetryableStatusCodes()) {
		t.Errorf("zero policy encodes as %s and decodes to %+v", data, got)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPolicyJSONKeepsSubMillisecondDurations: a budget of 500µs used to
// encode as 0, which decodes as no budget at all.
func TestPolicyJSONKeepsSubMillisecondDurations(t *testing.T) {
	t.Parallel()
	data := mustJSON(t, retry.Policy{Budget: 500 * time.Microsecond, CallTime: 250 * time.Microsecond})
	var got retry.Policy
	if err := json.Unmarshal([]byte(data), &got); err != nil {
		t.Fatal(err)
	}
	if got.Budget != 500*time.Microsecond || got.CallTime != 250*time.Microsecond {
		t.Errorf("%s decodes to budget %v, call time %v", data, got.Budget, got.CallTime)
	}
}

func TestPolicyJSONRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		input string
		want  []string
	}{
		{"zero attempts", `{"maxAttempts":0}`, []string{"maxAttempts"}},
		{"fractional attempts", `{"maxAttempts":2.5}`, []string{"maxAttempts"}},
		{"negative budget", `{"totalBudgetMs":-1}`, []string{"totalBudgetMs"}},
		{"bad status code", `{"retryableStatusCodes":[503,700]}`, []string{"retryableStatusCodes"}},
		{"codes not a list", `{"retryableStatusCodes":503}`, []string{"retryableStatusCodes"}},
		{"unknown field", `{"policyId":"x"}`, []string{"policyId"}},
		{"mixed", `{"maxAttempts":-3,"jitterType":"nope","extra":1}`, []string{"extra", "jitterType", "maxAttempts"}},
		{"every range error, not only the first", `{"initialDelayMs":-5,"multiplier":0.5,"jitterFactor":2}`, []string{"initialDelayMs", "jitterFactor", "multiplier"}},
		{"range errors beside a type error", `{"maxAttempts":"x","minDelayMs":5000,"maxDelayMs":1000,"callTimeMs":-1}`, []string{"callTimeMs", "maxAttempts", "minDelayMs"}},
		{"multiplier 0", `{"multiplier":0}`, []string{"multiplier"}},
		{"proportional jitter of 0", `{"jitterType":"PROPORTIONAL","jitterFactor":0}`, []string{"jitterFactor"}},
		{"schedule without delays", `{"backoff":"SCHEDULE","maxAttempts":3}`, []string{"delaysMs"}},
		{"schedule with a bad entry", `{"backoff":"SCHEDULE","delaysMs":[1000,-1],"maxAttempts":0}`, []string{"delaysMs", "maxAttempts"}},
		{"max doublings negative", `{"maxDoublings":-2,"totalBudgetMs":-1}`, []string{"maxDoublings", "totalBudgetMs"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var p retry.Policy
			err := json.Unmarshal([]byte(tt.input), &p)
			var got []string
			for _, fe := range backoff.FieldErrors(err) {
				got = append(got, fe.Field)
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("fields = %v, want %v (err %v)", got, tt.want, err)
			}
		})
	}
}

// TestPolicyJSONScheduleAndMaxDoublings: the backoff's new fields travel in
// the policy's JSON as the others do, and back.
func TestPolicyJSONScheduleAndMaxDoublings(t *testing.T) {
	t.Parallel()
	for _, p := range []retry.Policy{
		{MaxAttempts: 6, Backoff: backoff.Policy{Kind: backoff.Schedule, Delays: []time.Duration{time.Second, 5 * time.Second, 30 * time.Second}, Max: time.Minute, Jitter: backoff.NoJitter}},
		{MaxAttempts: 20, Budget: time.Hour, Backoff: backoff.Policy{Base: 10 * time.Second, Max: 5 * time.Minute, MaxDoublings: 3}},
	} {
		data := mustJSON(t, p)
		var q retry.Policy
		if err := json.Unmarshal([]byte(data), &q); err != nil {
			t.Fatalf("Unmarshal(%s): %v", data, err)
		}
		if again := mustJSON(t, q); again != data {
			t.Errorf("round trip of %s encodes as %s", data, again)
		}
		if !slices.Equal(q.Backoff.Delays, p.Backoff.Delays) || q.Backoff.MaxDoublings != p.Backoff.MaxDoublings {
			t.Errorf("%s decodes as %+v, want %+v", data, q.Backoff, p.Backoff)
		}
		for n := 1; n < p.Attempts(); n++ {
			if a, b := p.Backoff.Delay(n, 0, fixedBits(7)), q.Backoff.Delay(n, 0, fixedBits(7)); a != b {
				t.Errorf("%s: Delay(%d) = %v before the round trip, %v after", data, n, a, b)
			}
		}
	}
}

// fixedBits is a Source that always draws the same bits.
type fixedBits uint64

func (f fixedBits) Uint64() uint64 { return uint64(f) }

func TestPolicyValidate(t *testing.T) {
	t.Parallel()
	p := retry.Policy{MaxAttempts: -1, Budget: -1, CallTime: -1, RetryableStatusCodes: []int{99}, Backoff: backoff.Policy{Multiplier: 0.5}}
	var got []string
	for _, fe := range backoff.FieldErrors(p.Validate()) {
		got = append(got, fe.Field)
	}
	want := []string{"multiplier", "maxAttempts", "totalBudgetMs", "callTimeMs", "retryableStatusCodes"}
	if !slices.Equal(got, want) {
		t.Errorf("Validate fields = %v, want %v", got, want)
	}
	if err := (&retry.Policy{}).Validate(); err != nil {
		t.Errorf("zero policy invalid: %v", err)
	}
}

func FuzzPolicyJSON(f *testing.F) {
	for _, seed := range []string{
		`{}`, `{"maxAttempts":5,"totalBudgetMs":60000,"retryableStatusCodes":[429]}`,
		`{"backoff":"FIXED","initialDelayMs":0,"jitterType":"NONE"}`, `{"retryableStatusCodes":[]}`,
		`{"maxAttempts":1e9}`, `{"totalBudgetMs":9223372036854}`, `{"x":[{}]}`,
		`{"backoff":"SCHEDULE","delaysMs":[1000,5000,30000],"maxAttempts":10}`, `{"maxDoublings":3,"maxDelayMs":300000}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var p retry.Policy
		if err := json.Unmarshal(data, &p); err != nil {
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("decoded an invalid policy from %q: %v", data, err)
		}
		again, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("Marshal after Unmarshal(%q): %v", data, err)
		}
		var q retry.Policy
		if err := json.Unmarshal(again, &q); err != nil {
			t.Fatalf("Unmarshal(%s): %v", again, err)
		}
		if third, _ := json.Marshal(q); string(third) != string(again) {
			t.Fatalf("encoding is not stable: %s then %s", again, third)
		}
	})
}
