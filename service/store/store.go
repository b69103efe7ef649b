// Package store defines where retryd keeps its policies, tasks and attempt
// logs: the Store interface every backend implements (sqlite, postgres, redis)
// and the records it holds. The scheduler and the API use nothing else, so a
// backend drops in without either changing; package storetest is the one
// conformance suite every backend runs.
//
// Every method is durable before it returns: a state change a Store has
// acknowledged survives a crash of the process.
package store

import (
	"context"
	"errors"
	"time"
)

// Errors every Store returns, wrapped or not; callers test them with errors.Is.
var (
	ErrNotFound  = errors.New("not found")    // no such record for this tenant
	ErrConflict  = errors.New("conflict")     // exists with other content, or wrong state for the change
	ErrLeaseLost = errors.New("lease lost")   // the task's version moved on: another worker owns it now
	ErrClosed    = errors.New("store closed") // the Store was closed
)

// Status is a task's state. PENDING → IN_FLIGHT → SUCCEEDED | PENDING (retry)
// | EXHAUSTED | FAILED; PENDING → CANCELLED. EXHAUSTED and FAILED are the
// dead letters, which a redrive turns back into PENDING.
type Status string

// The task states, as the API spells them.
const (
	Pending   Status = "PENDING"
	InFlight  Status = "IN_FLIGHT"
	Succeeded Status = "SUCCEEDED"
	Exhausted Status = "EXHAUSTED"
	Failed    Status = "FAILED"
	Cancelled Status = "CANCELLED"
)

// Terminal reports whether no further attempt will be made in this state.
func (s Status) Terminal() bool {
	return s == Succeeded || s == Exhausted || s == Failed || s == Cancelled
}

// Policy is a registered retry policy. Spec is the policy's canonical JSON
// (retry.Policy's encoding), kept as bytes so that the store never
// interprets it and an identical re-registration compares byte for byte.
type Policy struct {
	Tenant    string
	ID        string
	Spec      []byte
	CreatedAt time.Time
}

// Task is one unit of retry work: call TargetURL until it succeeds or the
// policy gives up.
type Task struct {
	ID             string // UUID
	Tenant         string
	IdempotencyKey string // sent on every attempt; unique per tenant
	RequestHash    string // digest of the request, to tell a repeat from a conflicting reuse of the key

	TargetURL  string
	Method     string
	Headers    map[string]string
	Body       []byte
	BodyBinary bool // the client sent bodyBase64: render it back that way
	PolicyID   string

	Status        Status
	AttemptNumber int           // attempts made so far (claimed attempts included)
	NextAttemptAt time.Time     // when the next attempt is due
	PrevDelay     time.Duration // the last backoff delay, for decorrelated jitter across restarts
	BudgetStart   time.Time     // start of the time budget: creation, or the last redrive
	LastError     string
	LastStatus    int // the last response status, 0 if none

	LeaseUntil time.Time // while IN_FLIGHT: when the claim expires
	Version    int64     // bumped by every change; fences stale workers

	CreatedAt  time.Time
	UpdatedAt  time.Time
	FinishedAt time.Time // when it reached a terminal state; zero before
}

// Attempt is one entry of a task's attempt log.
type Attempt struct {
	TaskID         string
	AttemptNumber  int
	StartedAt      time.Time
	Duration       time.Duration
	ResponseStatus int    // 0 when no response came
	ErrorMessage   string // empty on success
	ResponseBody   string // the first bytes of the response, capped by the caller
}

// Page asks for one page of a list. Token is the opaque NextToken of the
// previous page, empty for the first.
type Page struct {
	Token string
	Limit int // ≤ 0 means the store's default (100); values over 1000 are cut to 1000
}

// TaskFilter narrows TaskList. Zero fields match everything.
type TaskFilter struct {
	Tenant   string
	Statuses []Status
	PolicyID string
}

// ClaimParams asks TaskClaim for up to Limit due tasks.
type ClaimParams struct {
	Now   time.Time
	Lease time.Duration // a claimed task is IN_FLIGHT until Now+Lease
	Limit int
	IDs   []string // when set, claim only among these tasks (the scheduler's heap knows which are due)
}

// Finish records the outcome of one claimed attempt.
type Finish struct {
	TaskID  string
	Version int64   // the version TaskClaim returned; a mismatch is ErrLeaseLost
	Attempt Attempt // appended to the attempt log

	Status        Status    // Succeeded, Pending (retry), Exhausted or Failed
	NextAttemptAt time.Time // when Status is Pending
	PrevDelay     time.Duration
	LastError     string
	LastStatus    int
	Now           time.Time
}

// Transition asks TaskTransition to move a task between states: cancel
// (PENDING → CANCELLED) or redrive (EXHAUSTED|FAILED → PENDING with the
// attempt count reset, NextAttemptAt and BudgetStart set to Now).
type Transition struct {
	Tenant string
	TaskID string
	From   []Status // the states the change is allowed from; otherwise ErrConflict
	To     Status
	Now    time.Time
}

// Store keeps retryd's state. Implementations must be safe for concurrent
// use and durable: a method that returned nil has its change on disk (or
// wherever the backend keeps it safe). All times are stored with millisecond
// precision at least.
type Store interface {
	// PolicyPut registers p. An existing (Tenant, ID) with the same Spec
	// returns it with created false; with another Spec, ErrConflict.
	PolicyPut(ctx context.Context, p *Policy) (stored *Policy, created bool, err error)
	// PolicyGet returns one policy, or ErrNotFound.
	PolicyGet(ctx context.Context, tenant, id string) (*Policy, error)
	// PolicyList lists a tenant's policies by ID.
	PolicyList(ctx context.Context, tenant string, page Page) (items []*Policy, next string, err error)

	// TaskCreate stores a new task, or returns the one already stored under
	// (Tenant, IdempotencyKey) with created false if its RequestHash matches,
	// or ErrConflict if it does not.
	TaskCreate(ctx context.Context, t *Task) (stored *Task, created bool, err error)
	// TaskGet returns one task of the tenant, or ErrNotFound.
	TaskGet(ctx context.Context, tenant, id string) (*Task, error)
	// TaskList lists tasks matching f, newest first, one page at a time.
	// An empty Tenant lists every tenant's (the scheduler uses this to
	// rebuild its heap).
	TaskList(ctx context.Context, f TaskFilter, page Page) (items []*Task, next string, err error)
	// TaskTransition applies a cancel or redrive, returning the task after it.
	TaskTransition(ctx context.Context, tr Transition) (*Task, error)

	// TaskClaim atomically leases up to p.Limit tasks that are due: PENDING
	// with NextAttemptAt ≤ Now, or IN_FLIGHT with LeaseUntil ≤ Now (a crashed
	// worker's; the lost attempt is counted and logged). Each claimed task is
	// IN_FLIGHT until Now+Lease, its AttemptNumber is the attempt about to be
	// made, and its Version is new.
	TaskClaim(ctx context.Context, p ClaimParams) ([]*Task, error)
	// TaskFinish records the outcomes of claimed attempts in one durable
	// step. errs[i] is ErrLeaseLost when fs[i]'s version is stale (nothing
	// of it is written); err is for failures of the whole call.
	TaskFinish(ctx context.Context, fs []Finish) (errs []error, err error)

	// AttemptList returns a task's attempt log, oldest first, or ErrNotFound
	// when the tenant has no such task.
	AttemptList(ctx context.Context, tenant, taskID string, page Page) (items []*Attempt, next string, err error)
	// TaskCounts returns the number of tasks in each state, for metrics.
	TaskCounts(ctx context.Context) (map[Status]int64, error)

	// Ping reports whether the store is reachable, for /readyz.
	Ping(ctx context.Context) error
	// Close releases the store's resources.
	Close() error
}
