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
		RetryableStatusCodes: []int{429, 503},
		Backoff:              backoff.Policy{Kind: backoff.Linear, Base: 200 * time.Millisecond, Multiplier: 2, Increment: 200 * time.Millisecond, Max: 10 * time.Second, Jitter: backoff.EqualJitter, JitterFactor: 0.1},
	}
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"backoff":"LINEAR","initialDelayMs":200,"multiplier":2,"incrementMs":200,"minDelayMs":0,"maxDelayMs":10000,"jitterType":"EQUAL","jitterFactor":0.1,"maxAttempts":7,"totalBudgetMs":90000,"retryableStatusCodes":[429,503]}`
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
	if !reflect.DeepEqual(got, want) {
		t.Errorf("{} decodes to %+v, want %+v", got, want)
	}
	data, _ := json.Marshal(retry.Policy{})
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if got.Attempts() != retry.DefaultMaxAttempts || !slices.Equal(got.RetryableStatusCodes, retry.DefaultRetryableStatusCodes()) {
		t.Errorf("zero policy encodes as %s and decodes to %+v", data, got)
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
