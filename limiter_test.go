package retry_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/retrytest"
)

// overloaded is what a dependency answers when it is: an HTTP 429, a
// throttle, which lowers the rate each time (a 503 does only in an outage:
// see TestLimiterTellsAnOutageFromAFlakyDependency).
var overloaded = &retrytest.StatusError{Status: 429}

// unavailable is a 503 without a hint: an outage signal.
var unavailable = &retrytest.StatusError{Status: 503}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newLimiter(t *testing.T, c retry.LimiterConfig) *retry.Limiter {
	t.Helper()
	l, err := retry.NewLimiter(c)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestLimiterRateFallsOnOverloadAndRisesOnSuccess follows the AIMD rule
// step by step: ×Decrease on an overload (at most once per Queue), +
// Increase/rate on a success, within Floor and Ceiling.
func TestLimiterRateFallsOnOverloadAndRisesOnSuccess(t *testing.T) {
	t.Parallel()
	l := newLimiter(t, retry.LimiterConfig{Floor: 10, Ceiling: 100, Increase: 50, Decrease: 0.5, CircuitAfter: -1})
	if got := l.Rate(); got != 100 {
		t.Fatalf("starts at %v, want the ceiling, 100", got)
	}
	// Let 100 attempts through in one second: the measured rate is 100/s.
	now := t0
	for range 100 {
		if _, err := l.Reserve(now, -1); err != nil {
			t.Fatal(err)
		}
		now = now.Add(10 * time.Millisecond)
	}
	l.Report(now, overloaded)
	if got := l.Rate(); math.Abs(got-50) > 1 {
		t.Errorf("after an overload: %v, want about 50 (100 × 0.5)", got)
	}
	l.Report(now.Add(time.Millisecond), overloaded) // within Queue of the last cut: no second cut
	if got := l.Rate(); math.Abs(got-50) > 1 {
		t.Errorf("a second overload at once cut the rate again: %v", got)
	}
	before := l.Rate()
	l.Report(now, nil)
	if got, want := l.Rate(), before+50/before; math.Abs(got-want) > 1e-9 {
		t.Errorf("after a success: %v, want %v (+ increase/rate)", got, want)
	}
	for range 10 {
		now = now.Add(time.Second)
		l.Report(now, overloaded)
	}
	if got := l.Rate(); got != 10 {
		t.Errorf("after many overloads: %v, want the floor, 10", got)
	}
	for range 10000 {
		l.Report(now, nil)
	}
	if got := l.Rate(); got != 100 {
		t.Errorf("after many successes: %v, want the ceiling, 100", got)
	}
	// A failure that is no overload signal changes nothing.
	l.Report(now, &retrytest.StatusError{Status: 500})
	if got := l.Rate(); got != 100 {
		t.Errorf("a 500 moved the rate to %v", got)
	}
}

// TestLimiterTellsAnOutageFromAFlakyDependency: a 503 without a hint
// lowers the rate only while such answers are most of the last second's
// (an outage), so a dependency that answers 503 to every first try and 200
// to the retry keeps its rate; a 429, or a 503 with Retry-After, is the
// dependency asking to slow down and lowers it at once, however rare.
func TestLimiterTellsAnOutageFromAFlakyDependency(t *testing.T) {
	t.Parallel()
	cfg := retry.LimiterConfig{Floor: 1, Ceiling: 1000, Increase: 10, CircuitAfter: -1}
	// answer reports n answers over one second, every k-th being err and
	// the others successes, and returns the rate after them.
	answer := func(l *retry.Limiter, now *time.Time, n, k int, err error) float64 {
		for i := range n {
			*now = now.Add(time.Second / time.Duration(n))
			if i%k == 0 {
				l.Report(*now, err)
			} else {
				l.Report(*now, nil)
			}
		}
		return l.Rate()
	}
	t.Run("flaky: half 503", func(t *testing.T) {
		t.Parallel()
		l, now := newLimiter(t, cfg), t0
		for range 10 {
			answer(l, &now, 500, 2, unavailable)
		}
		if got := l.Rate(); got != 1000 {
			t.Errorf("rate %v after 10 s of half 503s and half 200s, want it kept at 1000", got)
		}
	})
	t.Run("outage: every answer 503", func(t *testing.T) {
		t.Parallel()
		l, now := newLimiter(t, cfg), t0
		if got := answer(l, &now, 100, 1, unavailable); got >= 1000 {
			t.Errorf("rate %v after a second of 503s only, want it lowered", got)
		}
	})
	for name, err := range map[string]error{
		"429":             &retrytest.StatusError{Status: 429},
		"503 with a hint": &retrytest.StatusError{Status: 503, Hint: time.Second},
	} {
		t.Run("throttle, 1 in 10: "+name, func(t *testing.T) {
			t.Parallel()
			l, now := newLimiter(t, cfg), t0
			if got := answer(l, &now, 100, 10, err); got >= 1000 {
				t.Errorf("rate %v after 1 answer in 10 was %v, want it lowered", got, err)
			}
		})
	}
	t.Run("refused, 1 in 10", func(t *testing.T) {
		t.Parallel()
		l, now := newLimiter(t, cfg), t0
		if got := answer(l, &now, 100, 10, syscall.ECONNREFUSED); got != 1000 {
			t.Errorf("rate %v after 1 refused connection in 10, want it kept", got)
		}
	})
}

// TestLimiterSetIncrease: a success adds the increase set last over the
// rate; 0 restores the default, and a bad value changes nothing.
func TestLimiterSetIncrease(t *testing.T) {
	t.Parallel()
	l := newLimiter(t, retry.LimiterConfig{Floor: 10, Ceiling: 1000, Increase: 50, CircuitAfter: -1})
	l.Report(t0, overloaded) // 1000 × 0.8 = 800, measured 0: the floor
	step := func() float64 {
		before := l.Rate()
		l.Report(t0, nil)
		return (l.Rate() - before) * before
	}
	for _, tt := range []struct {
		set, want float64
	}{{25, 25}, {-1, 25}, {math.Inf(1), 25}, {0, retry.DefaultLimiterIncrease}, {100, 100}} {
		l.SetIncrease(tt.set)
		if got := step(); math.Abs(got-tt.want) > 1e-6 {
			t.Errorf("after SetIncrease(%v) a success adds %v/rate, want %v/rate", tt.set, got, tt.want)
		}
	}
}

// TestLimiterSpacesAttempts: at 10/s the limiter hands out a slot every
// 100 ms, queues no further ahead than Queue, and starts unrestricted when
// it has no Ceiling.
func TestLimiterSpacesAttempts(t *testing.T) {
	t.Parallel()
	l := newLimiter(t, retry.LimiterConfig{Floor: 1, Ceiling: 10, Queue: 250 * time.Millisecond})
	var waits []time.Duration
	for range 3 {
		w, err := l.Reserve(t0, -1)
		if err != nil {
			t.Fatal(err)
		}
		waits = append(waits, w)
	}
	if got, want := fmt.Sprint(waits), "[0s 100ms 200ms]"; got != want {
		t.Errorf("waits %s, want %s", got, want)
	}
	w, err := l.Reserve(t0, -1)
	if !errors.Is(err, retry.ErrLimited) || w <= 0 {
		t.Errorf("a fourth slot 300ms ahead, past the 250ms queue: %v, %v; want ErrLimited and a time to come back", w, err)
	}
	if w, err := l.Reserve(t0.Add(100*time.Millisecond), 50*time.Millisecond); !errors.Is(err, retry.ErrLimited) || w != 200*time.Millisecond {
		t.Errorf("a slot beyond maxWait: %v, %v; want 200ms and ErrLimited", w, err)
	}
	if w, err := l.Reserve(t0.Add(100*time.Millisecond), -1); err != nil || w != 200*time.Millisecond {
		t.Errorf("the same slot without a limit: %v, %v; want 200ms", w, err)
	}

	free := newLimiter(t, retry.LimiterConfig{})
	for range 1000 {
		if w, err := free.Reserve(t0, -1); w != 0 || err != nil {
			t.Fatalf("a limiter without a ceiling, before any overload: %v, %v", w, err)
		}
	}
	if r := free.Rate(); !math.IsInf(r, 1) {
		t.Errorf("Rate = %v, want +Inf", r)
	}
}

// TestLimiterCircuit: sustained overload opens the circuit; after OpenFor
// one probe goes; its overload opens it again, its success closes it with
// the rate back at the floor.
func TestLimiterCircuit(t *testing.T) {
	t.Parallel()
	l := newLimiter(t, retry.LimiterConfig{Floor: 2, Ceiling: 100, CircuitAfter: 3 * time.Second, OpenFor: time.Second, Rand: middle{}})
	now := t0
	for i := 0; l.State() == retry.CircuitClosed; i++ {
		if i > 100 {
			t.Fatal("the circuit never opened")
		}
		l.Report(now, overloaded)
		now = now.Add(500 * time.Millisecond)
	}
	if opened := now.Sub(t0) - 500*time.Millisecond; opened != 3*time.Second {
		t.Errorf("opened after %v of overloads, want 3s", opened)
	}
	now = now.Add(-500 * time.Millisecond) // the moment it opened
	if w, err := l.Reserve(now.Add(400*time.Millisecond), -1); !errors.Is(err, retry.ErrCircuitOpen) || w != 600*time.Millisecond {
		t.Errorf("while open: %v, %v; want 600ms and ErrCircuitOpen", w, err)
	}
	now = now.Add(time.Second)
	if w, err := l.Reserve(now, -1); err != nil || w != 0 {
		t.Fatalf("the probe: %v, %v; want to go at once", w, err)
	}
	if st := l.State(); st != retry.CircuitHalfOpen {
		t.Errorf("state %v, want half-open", st)
	}
	if _, err := l.Reserve(now, -1); !errors.Is(err, retry.ErrCircuitOpen) {
		t.Errorf("a second attempt while the probe is out: %v, want ErrCircuitOpen", err)
	}
	l.Report(now.Add(10*time.Millisecond), overloaded)
	if st := l.State(); st != retry.CircuitOpen {
		t.Fatalf("after the probe's overload: %v, want open", st)
	}
	now = now.Add(10*time.Millisecond + time.Second)
	if _, err := l.Reserve(now, -1); err != nil {
		t.Fatalf("the second probe: %v", err)
	}
	l.Report(now.Add(10*time.Millisecond), nil)
	if st, r := l.State(), l.Rate(); st != retry.CircuitClosed || r != 2 {
		t.Errorf("after the probe's success: %v at %v/s, want closed at the floor, 2/s", st, r)
	}
	// A probe that never answers is given up after OpenFor.
	l2 := newLimiter(t, retry.LimiterConfig{Ceiling: 10, CircuitAfter: time.Second, OpenFor: time.Second})
	for i := range 5 {
		l2.Report(t0.Add(time.Duration(i)*time.Second), overloaded)
	}
	probe := t0.Add(10 * time.Second)
	if _, err := l2.Reserve(probe, -1); err != nil {
		t.Fatal(err)
	}
	if _, err := l2.Reserve(probe.Add(time.Second), -1); err != nil {
		t.Errorf("a probe lost for OpenFor still blocks the next: %v", err)
	}
}

// middle is a random source whose every draw is 0.5: the circuit stays
// open for exactly OpenFor.
type middle struct{}

func (middle) Uint64() uint64 { return 1 << 63 }

// TestLimiterOpenTimesAreJittered: circuits opened together (one per
// client, by one outage) probe at different times, within [OpenFor/2,
// 3·OpenFor/2).
func TestLimiterOpenTimesAreJittered(t *testing.T) {
	t.Parallel()
	seen := map[time.Duration]bool{}
	for range 20 {
		l := newLimiter(t, retry.LimiterConfig{Ceiling: 10, CircuitAfter: time.Second, OpenFor: 2 * time.Second})
		for i := range 3 {
			l.Report(t0.Add(time.Duration(i)*time.Second), overloaded)
		}
		w, err := l.Reserve(t0.Add(2*time.Second), -1)
		if !errors.Is(err, retry.ErrCircuitOpen) || w < time.Second || w >= 3*time.Second {
			t.Fatalf("open for %v (%v), want within [1s, 3s)", w, err)
		}
		seen[w] = true
	}
	if len(seen) < 10 {
		t.Errorf("20 circuits opened at once probe at %d distinct times", len(seen))
	}
}

func TestLimiterNoCircuit(t *testing.T) {
	t.Parallel()
	l := newLimiter(t, retry.LimiterConfig{Ceiling: 10, CircuitAfter: -1})
	for i := range 100 {
		l.Report(t0.Add(time.Duration(i)*time.Second), overloaded)
	}
	if st := l.State(); st != retry.CircuitClosed {
		t.Errorf("state %v with CircuitAfter < 0, want closed", st)
	}
}

func TestNewLimiterValidates(t *testing.T) {
	t.Parallel()
	_, err := retry.NewLimiter(retry.LimiterConfig{Floor: -1, Ceiling: math.NaN(), Decrease: 1, Queue: -1, OpenFor: -time.Second})
	var got []string
	for _, fe := range backoff.FieldErrors(err) {
		got = append(got, fe.Field)
	}
	if want := "[floor ceiling decrease queue openFor]"; fmt.Sprint(got) != want {
		t.Errorf("fields %v, want %s", got, want)
	}
	if _, err := retry.NewLimiter(retry.LimiterConfig{Floor: 50, Ceiling: 10}); len(backoff.FieldErrors(err)) != 1 {
		t.Errorf("a ceiling below the floor: %v", err)
	}
}

func TestIsOverload(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"429", &retrytest.StatusError{Status: 429}, true},
		{"503 wrapped", fmt.Errorf("call: %w", overloaded), true},
		{"500", &retrytest.StatusError{Status: 500}, false},
		{"gRPC UNAVAILABLE", rpcError("UNAVAILABLE"), true},
		{"gRPC RESOURCE_EXHAUSTED", rpcError("RESOURCE_EXHAUSTED"), true},
		{"gRPC DEADLINE_EXCEEDED", rpcError("DEADLINE_EXCEEDED"), true},
		{"gRPC INTERNAL", rpcError("INTERNAL"), false},
		{"connection refused", &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, true},
		{"connection reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"timeout", context.DeadlineExceeded, true},
		{"cancelled", context.Canceled, false},
		{"plain", errFlaky, false},
	}
	for _, tt := range tests {
		if got := retry.IsOverload(tt.err); got != tt.want {
			t.Errorf("%s: IsOverload = %v, want %v", tt.name, got, tt.want)
		}
	}
}

type rpcError string

func (e rpcError) Error() string         { return "rpc error: " + string(e) }
func (e rpcError) RPCStatusCode() string { return string(e) }

// TestDoWaitsForTheLimiter: Do asks the limiter before every attempt, the
// first included, and sleeps (on the policy's clock) for the slot.
func TestDoWaitsForTheLimiter(t *testing.T) {
	t.Parallel()
	l := newLimiter(t, retry.LimiterConfig{Floor: 1, Ceiling: 10, Burst: 1, Queue: time.Second})
	p, clock := setup(t, retry.Policy{Limiter: l, MaxAttempts: 1})
	for range 3 {
		if err := retry.Do(context.Background(), p, func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := fmt.Sprint(clock.Sleeps()), "[100ms 100ms]"; got != want {
		t.Errorf("sleeps %s, want %s: 3 calls at 10/s", got, want)
	}
}

// TestDoStopsWhenTheLimiterHoldsItBackPastTheBudget: the reasons are
// ErrLimited and ErrCircuitOpen, reachable with errors.Is, beside the last
// attempt's error.
func TestDoStopsWhenTheLimiterHoldsItBackPastTheBudget(t *testing.T) {
	t.Parallel()
	t.Run("limited", func(t *testing.T) {
		t.Parallel()
		l := newLimiter(t, retry.LimiterConfig{Floor: 1, Ceiling: 1, Queue: 10 * time.Second})
		p, _ := setup(t, retry.Policy{Limiter: l, Budget: 500 * time.Millisecond, Backoff: fixedDelays(time.Millisecond)})
		calls := 0
		err := retry.Do(context.Background(), p, func(context.Context) error { calls++; return overloaded })
		var re *retry.Error
		if !errors.Is(err, retry.ErrLimited) || !errors.Is(err, overloaded) || !errors.As(err, &re) || re.Attempts != 1 || calls != 1 {
			t.Errorf("Do = %v after %d calls; want ErrLimited after 1 attempt, wrapping the 503", err, calls)
		}
	})
	t.Run("circuit open", func(t *testing.T) {
		t.Parallel()
		l := newLimiter(t, retry.LimiterConfig{Ceiling: 100, CircuitAfter: time.Second, OpenFor: time.Minute})
		p, clock := setup(t, retry.Policy{Limiter: l, MaxAttempts: 100, Budget: 10 * time.Second, Backoff: backoff.Policy{Kind: backoff.Fixed, Base: 400 * time.Millisecond, Jitter: backoff.NoJitter}})
		calls := 0
		err := retry.Do(context.Background(), p, func(context.Context) error { calls++; clock.Advance(10 * time.Millisecond); return overloaded })
		if !errors.Is(err, retry.ErrCircuitOpen) || l.State() != retry.CircuitOpen {
			t.Errorf("Do = %v after %d calls (circuit %v); want ErrCircuitOpen", err, calls, l.State())
		}
		// Another execution stops before any call.
		calls = 0
		err = retry.Do(context.Background(), p, func(context.Context) error { calls++; return nil })
		var re *retry.Error
		if !errors.Is(err, retry.ErrCircuitOpen) || !errors.As(err, &re) || re.Attempts != 0 || calls != 0 {
			t.Errorf("next Do = %v after %d calls; want ErrCircuitOpen and no call", err, calls)
		}
	})
	t.Run("caller's deadline", func(t *testing.T) {
		t.Parallel()
		l := newLimiter(t, retry.LimiterConfig{Floor: 0.1, Ceiling: 0.1, Queue: time.Hour})
		_, _ = l.Reserve(time.Now(), -1) // takes the one token
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		err := retry.Do(ctx, retry.Policy{Limiter: l}, func(context.Context) error { return nil })
		if !errors.Is(err, retry.ErrLimited) || time.Since(start) > 500*time.Millisecond {
			t.Errorf("Do = %v after %v; want ErrLimited at once: the slot is 10s away, the deadline 1s", err, time.Since(start))
		}
	})
}

// TestLimiterManyGoroutines shares one limiter between many goroutines
// on one fake clock: nothing races, and no more slots are handed out than
// the rate allows.
func TestLimiterManyGoroutines(t *testing.T) {
	t.Parallel()
	l := newLimiter(t, retry.LimiterConfig{Floor: 100, Ceiling: 100, Burst: 1, Queue: time.Second})
	clock := retrytest.NewClock(t0)
	p := retry.Policy{Limiter: l, Clock: clock, MaxAttempts: 3, Backoff: fixedDelays(time.Millisecond)}
	var calls, ok atomic.Int64
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			for i := range 20 {
				err := retry.Do(context.Background(), p, func(context.Context) error {
					calls.Add(1)
					if (g+i)%5 == 0 {
						return overloaded
					}
					return nil
				})
				if err == nil {
					ok.Add(1)
				}
			}
		})
	}
	wg.Wait()
	// Every sleep moves the shared clock forward, so the elapsed fake time
	// is at least what the rate needs for the calls made.
	elapsed := clock.Now().Sub(t0)
	if min := time.Duration(calls.Load()-1) * 10 * time.Millisecond; elapsed < min-time.Second {
		t.Errorf("%d calls in %v of fake time: faster than 100/s", calls.Load(), elapsed)
	}
	if ok.Load() == 0 {
		t.Error("no execution succeeded")
	}
	_ = l.Rate()
	_ = l.State()
}

// TestLimiterIgnoresTheCallersCancellation: an attempt the caller cut
// short is not an overload signal.
func TestLimiterIgnoresTheCallersCancellation(t *testing.T) {
	t.Parallel()
	l := newLimiter(t, retry.LimiterConfig{Ceiling: 10})
	ctx, cancel := context.WithCancel(context.Background())
	_ = retry.Do(ctx, retry.Policy{Limiter: l}, func(ctx context.Context) error {
		cancel()
		return fmt.Errorf("read: %w", syscall.ECONNRESET)
	})
	if got := l.Rate(); got != 10 {
		t.Errorf("rate %v after a cancelled call, want 10, unchanged", got)
	}
}

func TestCircuitStateString(t *testing.T) {
	t.Parallel()
	got := fmt.Sprint(retry.CircuitClosed, retry.CircuitOpen, retry.CircuitHalfOpen, retry.CircuitState(9))
	if want := "closed open half-open CircuitState(9)"; got != want {
		t.Errorf("%s, want %s", got, want)
	}
}

func TestLimitersOnePerKeyBounded(t *testing.T) {
	t.Parallel()
	ls, err := retry.NewLimiters(retry.LimiterConfig{Ceiling: 5}, 2)
	if err != nil {
		t.Fatal(err)
	}
	a, b := ls.Get("a:443"), ls.Get("b:443")
	if a == b || ls.Get("a:443") != a {
		t.Error("want one limiter per key, the same one each time")
	}
	ls.Get("c:443")
	if n := ls.Len(); n != 2 {
		t.Errorf("holds %d limiters, want at most 2", n)
	}
	if _, err := retry.NewLimiters(retry.LimiterConfig{Decrease: 3}, 0); err == nil {
		t.Error("a bad config: no error")
	}
	if _, err := retry.NewLimiters(retry.LimiterConfig{}, -1); err == nil {
		t.Error("a negative max: no error")
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				ls.Get(fmt.Sprint((g + i) % 5))
			}
		})
	}
	wg.Wait()
}

func TestLimiterConfigJSON(t *testing.T) {
	t.Parallel()
	c := retry.LimiterConfig{Floor: 10, Ceiling: 2000, Increase: 100, Decrease: 0.75, Burst: 5,
		Queue: 250 * time.Millisecond, CircuitAfter: 1500 * time.Microsecond, OpenFor: 3 * time.Second}
	data, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"floor":10,"ceiling":2000,"increase":100,"decrease":0.75,"burst":5,"outageShare":0.75,"queueMs":250,"circuitAfterMs":1.5,"openForMs":3000}`
	if string(data) != want {
		t.Errorf("Marshal = %s\nwant      %s", data, want)
	}
	var got retry.LimiterConfig
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if got.Floor != c.Floor || got.Ceiling != c.Ceiling || got.Increase != c.Increase || got.Decrease != c.Decrease ||
		got.Burst != c.Burst || got.Queue != c.Queue || got.CircuitAfter != c.CircuitAfter || got.OpenFor != c.OpenFor {
		t.Errorf("round trip = %+v, want %+v", got, c)
	}
	// Zero fields encode as their defaults; no circuit as -1.
	data, _ = json.Marshal(retry.LimiterConfig{CircuitAfter: -time.Second})
	want = `{"floor":1,"ceiling":0,"increase":10,"decrease":0.8,"burst":1,"outageShare":0.75,"queueMs":100,"circuitAfterMs":-1,"openForMs":5000}`
	if string(data) != want {
		t.Errorf("defaults: %s\nwant      %s", data, want)
	}
	if err := json.Unmarshal(data, &got); err != nil || got.CircuitAfter >= 0 {
		t.Errorf("no circuit decodes to %v, %v", got.CircuitAfter, err)
	}
	if err := json.Unmarshal([]byte(`{}`), &got); err != nil || got.Floor != 0 || got.CircuitAfter != 0 {
		t.Errorf("{} decodes to %+v, %v; want the zero config", got, err)
	}
}

func TestLimiterConfigJSONRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, input string
		want        []string
	}{
		{"negative floor", `{"floor":-1}`, []string{"floor"}},
		{"ceiling below floor", `{"floor":50,"ceiling":10}`, []string{"ceiling"}},
		{"decrease of 1", `{"decrease":1}`, []string{"decrease"}},
		{"wrong types", `{"burst":"x","queueMs":-5,"openForMs":"y"}`, []string{"burst", "openForMs", "queueMs"}},
		{"unknown field", `{"rate":3}`, []string{"rate"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := retry.LimiterConfig{Floor: 7}
			err := json.Unmarshal([]byte(tt.input), &c)
			var got []string
			for _, fe := range backoff.FieldErrors(err) {
				got = append(got, fe.Field)
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) || c.Floor != 7 {
				t.Errorf("fields %v, want %v (err %v); config %+v, want it unchanged", got, tt.want, err, c)
			}
		})
	}
}

// TestObserverHearsTheLimitersStop: the execution a limiter ends is heard
// as GaveUp with its reason, marked Repeated when the last attempt was
// heard as Retrying already.
func TestObserverHearsTheLimitersStop(t *testing.T) {
	t.Parallel()
	l := newLimiter(t, retry.LimiterConfig{Floor: 1, Ceiling: 1, Queue: time.Hour})
	var events []retry.Event
	p, _ := setup(t, retry.Policy{Limiter: l, Budget: 500 * time.Millisecond, Backoff: fixedDelays(time.Millisecond),
		Observer: retry.ObserverFunc(func(_ context.Context, e retry.Event) { events = append(events, e) })})
	_ = retry.Do(context.Background(), p, func(context.Context) error { return overloaded })
	if len(events) != 2 || events[0].Outcome != retry.Retrying ||
		events[1].Outcome != retry.GaveUp || events[1].Reason != retry.ErrLimited || !events[1].Repeated || events[1].Attempt != 1 {
		t.Errorf("events %+v; want Retrying, then GaveUp (ErrLimited, repeated) for attempt 1", events)
	}
}

func FuzzLimiterConfigJSON(f *testing.F) {
	for _, seed := range []string{`{}`, `{"floor":10,"ceiling":2000,"increase":100}`, `{"circuitAfterMs":-1}`,
		`{"decrease":0.99,"queueMs":0.5}`, `{"burst":1e12}`, `{"openForMs":null}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var c retry.LimiterConfig
		if err := json.Unmarshal(data, &c); err != nil {
			return
		}
		if _, err := retry.NewLimiter(c); err != nil {
			t.Fatalf("decoded an invalid config from %q: %v", data, err)
		}
		again, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("Marshal after Unmarshal(%q): %v", data, err)
		}
		var d retry.LimiterConfig
		if err := json.Unmarshal(again, &d); err != nil {
			t.Fatalf("Unmarshal(%s): %v", again, err)
		}
		if third, _ := json.Marshal(d); string(third) != string(again) {
			t.Fatalf("encoding is not stable: %s then %s", again, third)
		}
	})
}
