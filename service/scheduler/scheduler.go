// Package scheduler runs retryd's retry tasks: it knows when each task is
// next due (an in-memory min-heap rebuilt from the store at start and kept
// in step with every write), claims due tasks from the store with a lease,
// sends each attempt through a dispatch.Dispatcher, decides the next step
// with the core library's backoff and budget rules, and records outcomes
// in group commits: one durable store call for many finished attempts.
// Once the store has an attempt's outcome, the scheduler tells it as a
// retry.Event (Succeeded, Retrying or GaveUp) to Config.Observer: retryd
// counts attempts in its metrics from these events, and logs them at Debug.
//
// The store stays the authority: the heap only says which IDs to ask for,
// and a claim takes only what the store agrees is due, so a stale heap
// entry costs a wasted ID, never a double attempt. A periodic resync from
// the store repairs anything the heap missed.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/service/destination"
	"github.com/retrykit/retry/service/destination/gate"
	"github.com/retrykit/retry/service/dispatch"
	"github.com/retrykit/retry/service/hostlimit"
	"github.com/retrykit/retry/service/metrics"
	"github.com/retrykit/retry/service/store"
)

// Defaults for the zero fields of Config. Workers are goroutines that
// mostly wait on their targets, so there are many: on two cores, 512 of
// them keep the store's group commits full (retryd bench: 19.2k attempts/s
// against 16.8k with 256).
const (
	DefaultWorkers       = 512
	DefaultLease         = time.Minute
	DefaultClaimBatch    = 256
	DefaultClaimAhead    = 50 * time.Millisecond
	DefaultCommitBatch   = 512
	DefaultCommitWait    = 5 * time.Millisecond
	DefaultResync        = time.Minute
	DefaultShutdownGrace = 10 * time.Second
)

// SoonCommitWait is how long an outcome that makes its task due soon may
// wait for others to share its write, whatever Config.CommitWait says (at
// most that): its retry must be back in the heap in time to be sent. It is
// also the least any group of outcomes waits (see groupClock).
const SoonCommitWait = 250 * time.Microsecond

// leaseMargin is how much longer than one attempt a lease must last, so
// that a worker has time to record the outcome before the task is
// reclaimed.
const leaseMargin = time.Second

// maxClaimAhead bounds how far ahead of its due time a task is claimed.
const maxClaimAhead = time.Second

// Recorder is told what the scheduler does besides attempts' ends, which
// are Config.Observer's; *metrics.Metrics is one. Its methods are called
// from many goroutines at once.
type Recorder interface {
	Lag(tenant string, d time.Duration)              // attempt start minus due time
	LeaseLost(tenant, policy string)                 // an attempt's outcome dropped: its lease was lost
	Terminal(status store.Status, age time.Duration) // a task reached a terminal state
}

// TenantObserver is an Observer that is told whose task an attempt was:
// when Config.Observer is one, the scheduler calls ObserveTenant, with the
// task's tenant, in place of Observe. *metrics.Metrics is one, so that two
// tenants' policies of one ID are counted apart.
type TenantObserver interface {
	retry.Observer
	ObserveTenant(ctx context.Context, tenant string, e retry.Event)
}

// Store is what the scheduler needs of a store (every store.Store has it):
// claim due tasks, record their outcomes, list what is due for a resync,
// and read the policies tasks name.
type Store interface {
	TaskClaim(ctx context.Context, p store.ClaimParams) ([]*store.Task, error)
	TaskFinish(ctx context.Context, fs []store.Finish) (errs []error, err error)
	TaskDue(ctx context.Context, each func(store.Due)) error
	PolicyGet(ctx context.Context, tenant, id string) (*store.Policy, error)
}

// Config sets up a Scheduler. Store and Dispatcher are required; zero
// fields take the Default… values.
type Config struct {
	Store      Store
	Dispatcher *dispatch.Dispatcher
	Recorder   Recorder // nil records nothing
	// Observer hears the end of every attempt once the store has recorded
	// it (not an outcome dropped for a lost lease, nor a task finished
	// without an attempt): Succeeded, Retrying (Delay until the task is
	// due again) or GaveUp, Reason retry.ErrNotRetryable for a task
	// FAILED, the decision step's reason (retry.ErrAttemptsExhausted,
	// retry.ErrBudgetExhausted…) for one EXHAUSTED. Name is the task's
	// policy ID, Err (when the attempt failed) the attempt log's message,
	// with the response's status for retry.StatusCode, Elapsed counted
	// from the start of the task's budget. It is called from the
	// committing goroutine, one outcome after another: it must be quick.
	// *metrics.Metrics is one; nil hears nothing. An Observer that is a
	// TenantObserver is told the task's tenant too.
	Observer retry.Observer
	Logger   *slog.Logger // nil discards; at Debug, every attempt's event is logged with retry.Log

	Workers int           // attempts in flight at once
	Lease   time.Duration // how long a claimed task is ours; must exceed the dispatcher's timeout by a second

	ClaimBatch int // most tasks claimed in one store call
	// ClaimAhead is how long before its due time a task is claimed at
	// least: its worker then waits for the due time, so the claim's
	// durable commit does not delay the attempt. When claims get slower
	// the scheduler looks further ahead, up to a second (and less than
	// the lease's margin over an attempt). A task claimed ahead is
	// IN_FLIGHT in the store from its claim on, so it can no longer be
	// cancelled; its attempt still starts at its due time. Negative
	// means 0.
	ClaimAhead  time.Duration
	CommitBatch int // most outcomes recorded in one store call
	// CommitWait is how long an outcome may wait for more to share its
	// write, unless one of them needs it sooner (see groupClock): an
	// outcome that waits is one a crash loses (its attempt is then made
	// again), so keep it short. Negative means no wait.
	CommitWait time.Duration
	Resync     time.Duration // how often the heap is checked against the store

	// ShutdownGrace is how long Run lets attempts in flight finish once its
	// context ends; attempts still running then are cut short and their
	// tasks released, due at once.
	ShutdownGrace time.Duration
	// StoreRetry retries failed store calls; the zero Policy means
	// exponential backoff from 20ms to 2s, without end until the call's
	// context ends. Not-found, conflict, lease-lost, invalid and closed
	// errors are never retried.
	StoreRetry retry.Policy
	// Rand, when set, is the jitter's random source for every task, in
	// place of the policy's; nil means each policy's (the runtime's
	// generator, for a policy decoded from JSON). Workers draw from it at
	// once, so New wraps it with backoff.Locked.
	Rand backoff.Source
	// HostLimits, when set, admits every attempt through its target
	// host's adaptive limiter (see package hostlimit): an attempt it holds
	// back is not sent, its task goes back to PENDING uncharged, due when
	// the limiter expects room, its lastError saying so (a Recorder that
	// is a HeldRecorder counts it). A policy may turn it off for its
	// tasks or give them limiters of their own settings. nil admits
	// everything.
	HostLimits *hostlimit.Limits
	// Tracer, when set, records a span for every attempt (the target's
	// parent: see package tracing), with the claim and the finish of its
	// task as children; nil records none. Attempts carry their
	// traceparent either way.
	Tracer trace.TracerProvider
	// Destinations, when set, keeps the contract of the destinations
	// tasks name (see package gate): a task held back by it is not sent,
	// and goes back to PENDING uncharged, its lastError saying why. nil
	// fails the tasks that name one.
	Destinations *gate.Gate
	// Keys opens the task headers the API sealed (see
	// destination.SealHeaders) as each attempt is sent; nil leaves them
	// sealed, and an attempt of a task that has one fails.
	Keys destination.Sealer
}

// Scheduler runs due tasks. Create it with New, start it with Run; Wake is
// safe to call from any goroutine at any time, before Run too.
type Scheduler struct {
	cfg        Config
	st         Store
	disp       *dispatch.Dispatcher
	rec        Recorder
	obs        retry.Observer
	tobs       TenantObserver // obs, when it is one
	log        *slog.Logger
	pols       policyCache
	storeRetry retry.Policy
	tracer     trace.Tracer // nil: no spans
	spanStart  attemptStart
	horizon    store.SendHorizon // the store's, when it has one
	held       HeldRecorder      // rec, when it is one

	mu          sync.Mutex
	heap        *dueHeap
	ahead       lookahead
	handoffOpen bool // Reserve hands out workers: between Run's start and the end of its claim loop; under mu

	wakeC    chan struct{}    // the heap's earliest entry may have moved earlier
	freeC    chan struct{}    // a worker became free
	busy     atomic.Int64     // workers taken: attempts in flight and claims reserving them
	claiming atomic.Int32     // claims in flight
	claims   sync.WaitGroup   // claims and hand-offs in flight
	workers  sync.WaitGroup   // attempts in flight
	work     chan *store.Task // claimed tasks for the workers; as many slots as workers
	commits  chan finished
	running  atomic.Bool
}

// New checks cfg and returns a Scheduler.
func New(cfg Config) (*Scheduler, error) {
	if cfg.Store == nil || cfg.Dispatcher == nil {
		return nil, errors.New("scheduler: Config.Store and Config.Dispatcher are required")
	}
	setDefault(&cfg.Workers, DefaultWorkers)
	setDefault(&cfg.Lease, DefaultLease)
	setDefault(&cfg.ClaimBatch, DefaultClaimBatch)
	defaultOrNone(&cfg.ClaimAhead, DefaultClaimAhead)
	setDefault(&cfg.CommitBatch, DefaultCommitBatch)
	defaultOrNone(&cfg.CommitWait, DefaultCommitWait)
	setDefault(&cfg.Resync, DefaultResync)
	setDefault(&cfg.ShutdownGrace, DefaultShutdownGrace)
	cfg.ClaimBatch = min(cfg.ClaimBatch, store.MaxClaimLimit)
	cfg.Rand = backoff.Locked(cfg.Rand)
	longest := cfg.Dispatcher.Timeout()
	if cfg.Destinations != nil {
		longest = max(longest, cfg.Destinations.MaxTimeout())
	}
	spare := cfg.Lease - longest - leaseMargin
	if spare < 0 {
		return nil, fmt.Errorf("scheduler: lease %v is too short: attempts may take %v, so it must be at least %v",
			cfg.Lease, longest, longest+leaseMargin)
	}
	s := &Scheduler{
		cfg: cfg, st: cfg.Store, disp: cfg.Dispatcher, rec: cfg.Recorder, obs: cfg.Observer, log: cfg.Logger,
		heap: newDueHeap(),
		// Claiming ahead shortens the lease's margin over an attempt (a
		// claim's lease is counted from the horizon it claimed up to),
		// so the look-ahead takes at most half of what is spare.
		ahead:   lookahead{min: min(cfg.ClaimAhead, spare/2), max: min(maxClaimAhead, spare/2)},
		wakeC:   make(chan struct{}, 1),
		freeC:   make(chan struct{}, 1),
		commits: make(chan finished, cfg.CommitBatch),
		work:    make(chan *store.Task, cfg.Workers),
	}
	if cfg.Tracer != nil {
		s.tracer, s.spanStart = cfg.Tracer.Tracer(tracerName), newAttemptStart()
	}
	if s.rec == nil {
		s.rec = nopRecorder{}
	}
	s.tobs, _ = s.obs.(TenantObserver)
	s.held, _ = s.rec.(HeldRecorder)
	s.horizon, _ = cfg.Store.(store.SendHorizon)
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.storeRetry = storeRetryPolicy(cfg.StoreRetry, s.log)
	return s, nil
}

func setDefault[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// defaultOrNone sets a duration whose zero means def and whose negative
// means none (0).
func defaultOrNone(v *time.Duration, def time.Duration) {
	if *v == 0 {
		*v = def
	}
	*v = max(*v, 0)
}

// Wake tells the scheduler that task d.ID is due at d.At (the zero time
// means now) as of its version d.Version: the API calls it after a task is
// created or redriven, once the store has the change, and a store's change
// feed for every change another instance makes. It never blocks on I/O.
// News older than what the scheduler knows of the task is ignored, and a
// Wake for a task that is not actually due then is harmless: the store
// refuses to claim it and says when it is due.
func (s *Scheduler) Wake(d store.Due) {
	if d.At.IsZero() {
		d.At = time.Now()
	}
	// Round up to the millisecond the store keeps, so the heap never asks
	// for a task a little before the store considers it due.
	d.At = store.CeilMillis(d.At)
	s.file(d)
}

// file puts d in the heap and wakes the claim loop if it is now first.
func (s *Scheduler) file(d store.Due) {
	s.mu.Lock()
	first := s.heap.set(d)
	s.mu.Unlock()
	if first {
		signal(s.wakeC)
	}
}

// Pending returns the number of tasks the heap is tracking: due later,
// due now, or in flight.
func (s *Scheduler) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.heap.Len()
}

// signal sends on a one-slot channel without blocking: one pending signal
// is as good as many.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

type nopRecorder struct{}

func (nopRecorder) Lag(string, time.Duration)            {}
func (nopRecorder) LeaseLost(string, string)             {}
func (nopRecorder) Terminal(store.Status, time.Duration) {}

var (
	_ Recorder       = (*metrics.Metrics)(nil)
	_ HeldRecorder   = (*metrics.Metrics)(nil)
	_ TenantObserver = (*metrics.Metrics)(nil)
)
