package backoff_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/retrykit/retry/backoff"
)

// The delays of an exponential policy without jitter: doubling from the base
// until the cap.
func ExamplePolicy_Delay() {
	p := backoff.Policy{Kind: backoff.Exponential, Base: 100 * time.Millisecond, Max: time.Second, Jitter: backoff.NoJitter}
	for n := 1; n <= 5; n++ {
		fmt.Println(n, p.Delay(n, 0, nil))
	}
	// Output:
	// 1 100ms
	// 2 200ms
	// 3 400ms
	// 4 800ms
	// 5 1s
}

// A seeded source makes jittered delays reproducible, and a Sequence keeps
// the previous delay that decorrelated jitter grows from.
func ExampleSequence() {
	p := backoff.Policy{Base: 10 * time.Millisecond, Max: time.Second, Jitter: backoff.DecorrelatedJitter}
	seq := backoff.NewSequence(p, rand.NewPCG(1, 2))
	for range 4 {
		d := seq.Next()
		fmt.Println(d >= 10*time.Millisecond && d <= time.Second)
	}
	// Output:
	// true
	// true
	// true
	// true
}

// Policies travel as JSON with the service's field names; omitted fields
// take their defaults and every bad field is reported by name.
func ExamplePolicy_UnmarshalJSON() {
	var p backoff.Policy
	err := json.Unmarshal([]byte(`{"backoff":"LINEAR","initialDelayMs":250,"jitterType":"EQUAL"}`), &p)
	fmt.Println(p.Kind, p.Base, p.Jitter, p.Max, err)

	err = json.Unmarshal([]byte(`{"initialDelayMs":-1,"jitterType":"SOMETIMES"}`), &p)
	for _, fe := range backoff.FieldErrors(err) {
		fmt.Println(fe.Field)
	}
	// Output:
	// LINEAR 250ms EQUAL 30s <nil>
	// initialDelayMs
	// jitterType
}
