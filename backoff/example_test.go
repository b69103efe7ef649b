package backoff_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
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

// Each zero field takes its own default: setting the jitter alone keeps the
// 100ms base and the 30s cap. None says zero where zero would mean the
// default: no delay, no step, no cap.
func ExampleNone() {
	noJitter := backoff.Policy{Jitter: backoff.NoJitter}
	fmt.Println(noJitter.Delay(1, 0, nil), noJitter.Delay(3, 0, nil), noJitter.Delay(20, 0, nil))

	uncapped := backoff.Policy{Max: backoff.None, Jitter: backoff.NoJitter}
	fmt.Println(uncapped.Delay(20, 0, nil))

	immediate := backoff.Policy{Kind: backoff.Fixed, Base: backoff.None, Jitter: backoff.NoJitter}
	fmt.Println(immediate.Delay(5, 0, nil))

	data, _ := json.Marshal(immediate)
	fmt.Println(string(data))
	// Output:
	// 100ms 400ms 30s
	// 14h33m48.8s
	// 0s
	// {"backoff":"FIXED","initialDelayMs":0,"multiplier":2,"incrementMs":0,"minDelayMs":0,"maxDelayMs":30000,"jitterType":"NONE","jitterFactor":0.1}
}

// One seeded generator shared by several goroutines must be locked: a
// math/rand/v2 PCG or ChaCha8 is not safe for concurrent use.
func ExampleLocked() {
	p := backoff.Policy{Base: 10 * time.Millisecond, Max: time.Second}
	src := backoff.Locked(rand.NewPCG(1, 2))
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			seq := backoff.NewSequence(p, src)
			for range 3 {
				seq.Next()
			}
		})
	}
	wg.Wait()
	fmt.Println("no data race")
	// Output: no data race
}
