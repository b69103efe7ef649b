package retry

import (
	"errors"
	"sync"
	"time"

	"github.com/retrykit/retry/backoff"
)

// MinTickerInterval is the shortest interval a Ticker waits; shorter delays
// drawn from its policy are raised to it, so a policy that can draw zero never
// makes a busy loop.
const MinTickerInterval = time.Millisecond

// Ticker delivers ticks at intervals drawn from a backoff policy, so that a
// fleet of clients with the same period never ticks in step: heartbeats,
// health checks, state sync. With a growing policy (exponential, say) it paces
// a reconnect loop; Reset starts the growth over after a success.
//
// Like time.Ticker, it drops ticks for a slow receiver rather than piling
// them up. Its methods are safe for concurrent use.
type Ticker struct {
	C <-chan time.Time // the ticks

	c     chan time.Time
	mu    sync.Mutex
	timer *time.Timer
	seq   *backoff.Sequence
	done  bool
}

// NewTicker starts a ticker whose intervals are the delays of p, drawn with
// src (nil means the runtime's generator). A fixed policy with proportional
// jitter gives "every 30 s ± 10%":
//
//	backoff.Policy{Kind: backoff.Fixed, Base: 30 * time.Second, Max: backoff.None, Jitter: backoff.ProportionalJitter}
func NewTicker(p backoff.Policy, src backoff.Source) (*Ticker, error) {
	if err := p.Validate(); err != nil {
		return nil, errors.Join(errors.New("retry: ticker policy"), err)
	}
	c := make(chan time.Time, 1)
	t := &Ticker{C: c, c: c, seq: backoff.NewSequence(p, src)}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.timer = time.AfterFunc(t.next(), t.tick)
	return t, nil
}

func (t *Ticker) next() time.Duration { return max(t.seq.Next(), MinTickerInterval) }

func (t *Ticker) tick() {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return
	}
	select {
	case t.c <- now:
	default:
	}
	t.timer.Reset(t.next())
}

// Stop turns the ticker off; no tick is sent after Stop returns (one sent
// before may still wait in C). Stop does not close C.
func (t *Ticker) Stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.done = true
	t.timer.Stop()
}

// Reset starts the policy's sequence over: the next interval is the one
// before retry 1 again, counted from now.
func (t *Ticker) Reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return
	}
	t.seq.Reset()
	t.timer.Reset(t.next())
}
