package limits

import (
	"context"
	"sync"

	"github.com/retrykit/retry/service/store"
)

// Local holds limits in memory, for a process that owns its store: no
// other process sends to its destinations. It follows the rules of the
// package documentation and forgets a key Idle after the last moment its
// state could matter, so memory holds only the keys in use. It is safe for
// concurrent use.
type Local struct {
	mu   sync.Mutex
	keys map[string]*entry
	// latest is the latest Now seen (µs) and swept the latest when the
	// keys were last swept: time, for forgetting, is the callers'.
	latest, swept int64
}

// entry is one key's state. Times are µs.
type entry struct {
	tat, ticket int64 // 0 until the rate sets them
	slots       slots
	// until is when the state stops mattering: the latest of tat, ticket
	// and the slots' expiries. From then on the key answers as a new one.
	until int64
}

// NewLocal returns an empty Local.
func NewLocal() *Local { return &Local{keys: map[string]*entry{}} }

// LimitAcquire asks for room for one attempt under p; see store.Limits.
func (l *Local) LimitAcquire(_ context.Context, p store.LimitParams) (store.LimitGrant, error) {
	pl, err := NewPlan(p)
	if err != nil {
		return store.LimitGrant{}, err
	}
	if pl.Interval == 0 && pl.MaxInFlight == 0 {
		return pl.Granted(pl.Now, ""), nil // nothing to hold
	}
	slot := pl.NewSlot() // outside the lock: it reads the random source
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(pl.Now)
	e := l.keys[pl.Key]
	if e == nil {
		e = &entry{}
		l.keys[pl.Key] = e
	}
	now, at, tat := pl.Now, pl.Now, int64(0)
	if pl.Interval > 0 {
		tat = max(e.tat, now)
		if tat-pl.Tau-now > pl.MaxWait {
			e.ticket = max(e.ticket, tat-pl.Tau, now) + pl.Interval
			e.until = max(e.until, e.ticket)
			return pl.RefusedRate(e.ticket), nil
		}
		at = max(tat-pl.Tau, now)
	}
	if pl.MaxInFlight > 0 && e.slots.live(now) >= pl.MaxInFlight {
		return pl.RefusedInFlight(), nil
	}
	if pl.Interval > 0 {
		e.tat = tat + pl.Interval
		e.until = max(e.until, e.tat)
	}
	if slot != "" {
		e.slots.add(slot, now+pl.Hold)
		e.until = max(e.until, now+pl.Hold)
	}
	return pl.Granted(at, slot), nil
}

// LimitRelease frees a slot; see store.Limits.
func (l *Local) LimitRelease(_ context.Context, key, slot string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.keys[key]; e != nil {
		e.slots.remove(slot)
	}
	return nil
}

// sweep forgets, once per Idle of the callers' time, the keys whose state
// stopped mattering more than Idle ago: each sweep reads every key, and
// spacing them so keeps that a small part of the calls' cost.
func (l *Local) sweep(now int64) {
	l.latest = max(l.latest, now)
	if l.latest-l.swept < Idle.Microseconds() {
		return
	}
	l.swept = l.latest
	for k, e := range l.keys {
		if e.until+Idle.Microseconds() <= l.latest {
			delete(l.keys, k)
		}
	}
}

var _ store.Limits = (*Local)(nil)
