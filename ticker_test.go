package retry_test

import (
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
)

// TestTickerJitters checks the intervals between ticks: never shorter than
// the policy allows (timers do not fire early) and not all alike.
func TestTickerJitters(t *testing.T) {
	t.Parallel()
	p := backoff.Policy{Kind: backoff.Fixed, Base: 20 * time.Millisecond, Jitter: backoff.ProportionalJitter, JitterFactor: 0.5}
	tk, err := retry.NewTicker(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Stop()
	var ticks []time.Time
	for range 8 {
		select {
		case at := <-tk.C:
			ticks = append(ticks, at)
		case <-time.After(10 * time.Second):
			t.Fatal("no tick within 10s")
		}
	}
	shortest, longest := time.Hour, time.Duration(0)
	for i := 1; i < len(ticks); i++ {
		gap := ticks[i].Sub(ticks[i-1])
		shortest, longest = min(shortest, gap), max(longest, gap)
	}
	if shortest < 10*time.Millisecond {
		t.Errorf("shortest interval %v, below the policy's 10ms floor", shortest)
	}
	if longest-shortest < time.Millisecond {
		t.Errorf("intervals span only %v..%v: not jittered", shortest, longest)
	}
}

func TestTickerStopAndReset(t *testing.T) {
	t.Parallel()
	p := backoff.Policy{Kind: backoff.Exponential, Base: 5 * time.Millisecond, Max: time.Hour, Jitter: backoff.NoJitter}
	tk, err := retry.NewTicker(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-tk.C // 5ms
	<-tk.C // 10ms more
	tk.Reset()
	start := time.Now()
	<-tk.C
	if gap := time.Since(start); gap > 5*time.Second {
		t.Errorf("after Reset the next tick took %v; the sequence did not start over", gap)
	}
	tk.Stop()
	select {
	case <-tk.C: // one tick may have been sent before Stop
	default:
	}
	select {
	case <-tk.C:
		t.Error("tick after Stop")
	case <-time.After(100 * time.Millisecond):
	}
	tk.Reset() // a no-op once stopped
	select {
	case <-tk.C:
		t.Error("Reset revived a stopped ticker")
	case <-time.After(50 * time.Millisecond):
	}
}

func TestNewTickerRejectsInvalidPolicy(t *testing.T) {
	t.Parallel()
	if _, err := retry.NewTicker(backoff.Policy{Min: -time.Second}, nil); err == nil {
		t.Error("NewTicker accepted a negative minimum")
	}
}
