// Package gate keeps each destination's contract at each attempt: it reads
// the destination a task names (through a short-lived cache, so that a
// change anywhere in the fleet reaches every instance within MaxAge),
// holds the attempt back while the destination is paused or disabled or
// while its rate or in-flight limit has no room, and dresses the request
// that goes: the destination's URL, headers and credentials, its own TLS,
// its signature.
//
// A held attempt is neither sent nor charged: the scheduler hands its task
// back PENDING, due when the gate says there may be room.
package gate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/retrykit/retry/service/destination"
	"github.com/retrykit/retry/service/dispatch"
	"github.com/retrykit/retry/service/store"
)

// Defaults for the zero fields of Config.
const (
	DefaultMaxAge  = time.Second
	DefaultMaxWait = 250 * time.Millisecond
)

// Hold reasons, as a held task's lastError ends: "(held: <reason>)".
const (
	HeldPaused      = "paused"
	HeldDisabled    = "disabled"
	HeldRate        = store.LimitRate
	HeldInFlight    = store.LimitInFlight
	HeldUnavailable = "destination unavailable"
	HeldToken       = "token refreshed"
)

// Recorder is told what the gate does, for metrics; *metrics.Metrics is
// one. Its methods are called from many goroutines at once.
type Recorder interface {
	DestinationHeld(tenant, id, reason string)
	DestinationInFlight(tenant, id string, delta int)
	DestinationStatus(tenant, id string, status destination.Status)
}

// Config sets up a Gate. Store, Limits, Keys and Dispatcher are required.
type Config struct {
	Store store.Destinations
	// Limits holds rate and in-flight limits: the store's when the store
	// is shared (store.Limits), one in memory otherwise.
	Limits store.Limits
	Keys   destination.Sealer
	// Dispatcher sends the attempts of destinations without TLS settings
	// of their own, and is the model of those with.
	Dispatcher *dispatch.Dispatcher
	// MaxAge is how long a read of a destination is used before it is
	// read again: how soon a change made by another instance is obeyed.
	MaxAge time.Duration
	// MaxWait is how long an attempt may wait in its worker for a rate
	// token before it is handed back instead.
	MaxWait time.Duration
	// Hold is how long an in-flight slot lasts when its instance dies
	// without releasing it: a lease's length.
	Hold time.Duration
	// MaxTimeout is the operator's bound on a destination's timeoutMs:
	// the longest an attempt through the gate may take.
	MaxTimeout time.Duration
	Recorder   Recorder // nil records nothing
	Logger     *slog.Logger
	Now        func() time.Time // nil is time.Now
}

// Gate is safe for concurrent use. Close it to drop what it keeps.
type Gate struct {
	cfg    Config
	tokens *http.Client // for OAuth2 token endpoints: guarded, like attempts

	mu      sync.Mutex
	entries map[key]*entry
}

type key struct{ tenant, id string }

// New returns a Gate for cfg.
func New(cfg Config) (*Gate, error) {
	if cfg.Store == nil || cfg.Keys == nil || cfg.Dispatcher == nil || cfg.Limits == nil {
		return nil, errors.New("gate: Config.Store, Keys, Limits and Dispatcher are required")
	}
	cfg.MaxAge = cmp.Or(cfg.MaxAge, DefaultMaxAge)
	cfg.MaxWait = cmp.Or(cfg.MaxWait, DefaultMaxWait)
	cfg.Hold = cmp.Or(cfg.Hold, time.Minute)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Gate{cfg: cfg, tokens: cfg.Dispatcher.HTTPClient(), entries: map[key]*entry{}}, nil
}

// MaxTimeout returns the longest an attempt through the gate may take.
func (g *Gate) MaxTimeout() time.Duration { return max(g.cfg.MaxTimeout, g.cfg.Dispatcher.Timeout()) }

// Close closes the destinations' own dispatchers.
func (g *Gate) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k, e := range g.entries {
		e.close()
		delete(g.entries, k)
	}
}

// Forget drops what the gate read of a destination, so that its next
// attempt reads it again: what an instance does after changing it.
func (g *Gate) Forget(tenant, id string) {
	g.mu.Lock()
	e := g.entries[key{tenant, id}]
	g.mu.Unlock()
	if e != nil {
		e.mu.Lock()
		e.fetched = time.Time{}
		e.mu.Unlock()
	}
}

// Hold says that an attempt waits: its task goes back PENDING, uncharged,
// due at Until, its lastError saying Reason.
type Hold struct {
	Until  time.Time
	Reason string
}

// ErrGone is wrapped by Admit's error when the destination a task names
// does not exist: the task cannot be sent.
var ErrGone = errors.New("destination not found")

// Admit decides the attempt of t, whose TargetURL names a destination
// (destination.IsTarget). It returns the Call to make, or a Hold, or an
// error wrapping ErrGone when the destination does not exist. Rate and
// in-flight limits are taken later, by Call.Acquire, so that a caller that
// holds the attempt for another reason in between takes none.
func (g *Gate) Admit(ctx context.Context, t *store.Task) (*Call, *Hold, error) {
	id, path, ok := destination.ParseTarget(t.TargetURL)
	if !ok {
		return nil, nil, fmt.Errorf("task %s: target %q names no destination: %w", t.ID, t.TargetURL, ErrGone)
	}
	now := g.cfg.Now()
	e, v, err := g.entry(ctx, t.Tenant, id, now)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil, fmt.Errorf("destination %s: %w", id, ErrGone)
		}
		g.cfg.Logger.Warn("gate: destination unusable; the attempt waits", "destination", id, "error", err)
		return nil, g.hold(t.Tenant, id, now.Add(time.Second), HeldUnavailable), nil
	}
	switch v.d.Status {
	case destination.Paused, destination.Disabled:
		reason := HeldPaused
		if v.d.Status == destination.Disabled {
			reason = HeldDisabled
		}
		return nil, g.hold(t.Tenant, id, now.Add(pauseHold(now, v.d.StatusSince)), reason), nil
	}
	// The task's path was checked against the URL when it was made; the
	// URL may have changed since, and a path must never lead elsewhere.
	if why := destination.CheckPath(v.d.URL, path); why != "" {
		return nil, nil, fmt.Errorf("destination %s: the task's path %q %s: %w", id, path, why, ErrGone)
	}
	return &Call{g: g, e: e, v: v, tenant: t.Tenant, id: id, URL: v.d.Resolve(path)}, nil, nil
}

// pauseHold is how long a paused or disabled destination's task waits
// before it looks again: half the pause's age so far, within a second and
// half a minute, so that a short pause ends soon after its resume and a
// long one costs a claim a task every half minute, spread by jitter.
func pauseHold(now time.Time, sinceMs int64) time.Duration {
	age := now.Sub(time.UnixMilli(sinceMs))
	d := min(max(age/2, time.Second), 30*time.Second)
	return d + rand.N(d/5+1)
}

func (g *Gate) hold(tenant, id string, until time.Time, reason string) *Hold {
	if r := g.cfg.Recorder; r != nil {
		r.DestinationHeld(tenant, id, reason)
	}
	return &Hold{Until: store.CeilMillis(until), Reason: reason}
}

// entry returns the cache entry of (tenant, id), read again from the store
// when older than MaxAge. A read that fails keeps serving the entry it has,
// if any, so that a store's blip does not stop attempts.
func (g *Gate) entry(ctx context.Context, tenant, id string, now time.Time) (*entry, *view, error) {
	k := key{tenant, id}
	g.mu.Lock()
	e := g.entries[k]
	if e == nil {
		e = &entry{}
		g.entries[k] = e
	}
	g.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.fetched.IsZero() && now.Sub(e.fetched) < g.cfg.MaxAge {
		return e, e.cur, e.err
	}
	sd, err := g.cfg.Store.DestinationGet(ctx, tenant, id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		if e.cur != nil {
			return e, e.cur, nil // a store's blip: what was read a moment ago still holds
		}
		return nil, nil, err
	}
	var v *view
	if err == nil {
		if e.cur != nil && e.cur.version == sd.Version {
			e.fetched, e.err = now, nil
			return e, e.cur, nil
		}
		v, err = g.load(tenant, sd, e.cur)
	}
	// A destination gone or unusable is remembered as such for MaxAge,
	// like one read: its tasks do not each read the store.
	e.fetched, e.err = now, err
	if err != nil {
		if e.cur != nil {
			e.cur.retire()
			e.cur = nil
		}
		return nil, nil, err
	}
	if r := g.cfg.Recorder; r != nil && (e.cur == nil || e.cur.d.Status != v.d.Status) {
		r.DestinationStatus(tenant, id, v.d.Status)
	}
	if e.cur != nil {
		e.cur.retire()
	}
	e.cur = v
	return e, v, nil
}
