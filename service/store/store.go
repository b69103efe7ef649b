// Package store defines where retryd keeps its policies, tasks and attempt
// logs: the Store interface every backend implements (sqlite, postgres, redis)
// and the records it holds. The scheduler and the API use nothing else, so a
// backend drops in without either changing; package storetest is the one
// conformance suite every backend runs.
//
// Every method is durable before it returns: a state change a Store has
// acknowledged survives a crash of the process.
//
// Conventions every backend keeps (storetest checks each):
//   - Times are kept with millisecond precision at least; durations too.
//   - Methods return fresh values: the caller may keep or change them, and
//     the Store never changes the values it was given.
//   - Tenants are separate worlds: another tenant's IDs answer ErrNotFound.
//   - Page tokens are opaque; one the Store did not issue is ErrInvalid.
package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"time"
)

// Errors every Store returns, wrapped or not; callers test them with errors.Is.
var (
	ErrNotFound  = errors.New("not found")    // no such record for this tenant
	ErrConflict  = errors.New("conflict")     // exists with other content, or wrong state for the change
	ErrLeaseLost = errors.New("lease lost")   // the task's version moved on: another worker owns it now
	ErrClosed    = errors.New("store closed") // the Store was closed
	ErrInvalid   = errors.New("invalid")      // a malformed argument: a bad page token, an unknown status or transition
)

// Limits of lists and claims; see Page and ClaimParams.
const (
	DefaultPageLimit = 100
	MaxPageLimit     = 1000
	MaxClaimLimit    = 1000
	DueBatch         = 1000 // how many tasks TaskDue reads at a time
)

// LeaseExpiredMessage is the ErrorMessage of the attempt a Store logs when
// it reclaims a task whose lease ran out before its worker finished it.
const LeaseExpiredMessage = "lease expired before the attempt's outcome was recorded"

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

// Statuses returns every status, in the order of a task's life.
func Statuses() []Status { return []Status{Pending, InFlight, Succeeded, Exhausted, Failed, Cancelled} }

// ZeroCounts returns tasks counted by status with every status at 0: what
// TaskCounts and TenantCounts answer with no tasks, and start from.
func ZeroCounts() map[Status]int64 {
	out := make(map[Status]int64, 6)
	for _, st := range Statuses() {
		out[st] = 0
	}
	return out
}

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
// policy gives up. TaskCreate reads the request fields (ID through
// PolicyID, BudgetStart, NextAttemptAt, CreatedAt); a Store owns the others.
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
	// BodyRef, when not empty, says where the body is instead of Body: a
	// reference to an object, "blob:sha256:<hex>" in retryd's own blob
	// store or "s3://bucket/key" for one in S3 (retryd's or the caller's).
	// Body is then empty: a task with both is ErrInvalid. The store keeps
	// the reference as given and never reads the object; it tells which
	// references tasks still hold (Purger.BodyRefsInUse).
	BodyRef string
	// BodySize is the body's size in bytes, whichever way it is held: for
	// a body by reference, what the creator says it is (the store keeps it;
	// a negative size is ErrInvalid); for an inline body, len(Body), which
	// TaskCreate sets (a size given for an inline body must be 0 or
	// len(Body), else ErrInvalid).
	BodySize int64
	PolicyID string

	Status        Status
	AttemptNumber int           // attempts made so far (claimed attempts included)
	NextAttemptAt time.Time     // when the next attempt is due
	PrevDelay     time.Duration // the last backoff delay, for decorrelated jitter across restarts
	BudgetStart   time.Time     // start of the time budget: creation, or the last redrive
	LastError     string
	LastStatus    int // the last response status, 0 if none

	LeaseUntil time.Time // while IN_FLIGHT: when the claim expires
	// Holder is, in a task TaskClaim returned, the instance whose lease
	// it is (Instances.Join), empty when none joined. Other reads may
	// leave it empty.
	Holder  string
	Version int64 // bumped by every change; fences stale workers

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
	Limit int // ≤ 0 means DefaultPageLimit; values over MaxPageLimit are cut to it
}

// PageLimit returns the number of items a page of limit holds, applying
// Page's rules, for backends.
func PageLimit(limit int) int {
	switch {
	case limit <= 0:
		return DefaultPageLimit
	case limit > MaxPageLimit:
		return MaxPageLimit
	}
	return limit
}

// TaskFilter narrows TaskList. Zero fields match everything; set fields
// must all match.
type TaskFilter struct {
	Tenant   string
	Statuses []Status
	PolicyID string
	// TargetHost matches a task whose TargetURL's host (url.URL.Host: the
	// host name, and the port when the URL gives one) equals it, compared
	// without regard to case.
	TargetHost string
	// IdempotencyKey matches the one task of the tenant with this key,
	// found by the record that deduplicates creates. It needs Tenant: one
	// without is ErrInvalid, since keys are unique per tenant only.
	IdempotencyKey string
}

// ClaimParams asks TaskClaim for up to Limit due tasks.
type ClaimParams struct {
	Now   time.Time
	Lease time.Duration // a claimed task is IN_FLIGHT until Now+Lease
	Limit int           // ≤ 0 means len(IDs) when IDs is set, else 1; over MaxClaimLimit is cut to it
	IDs   []string      // when set, claim only among these tasks (the scheduler's heap knows which are due); IDs that are unknown or not due are skipped
	// Later, when set along with IDs, is called once TaskClaim has
	// committed with when each named live task it did not claim (not due
	// yet, held by another worker's lease, or past Limit) is next due, as
	// TaskDue would report it; unknown and terminal tasks are not
	// reported. A scheduler files those again instead of forgetting them.
	// Later must not call the store.
	Later func(Due)
	// OmitRequest lets the Store leave the request of the claimed tasks
	// (TargetURL, Method, Headers, Body, BodyBinary, BodyRef, BodySize)
	// zero instead of
	// reading it: a caller that kept the requests from earlier claims sets
	// it, since a task's request never changes. A Store may fill them in
	// anyway; every other field is as without it.
	OmitRequest bool
}

// Unclaimed returns the IDs of p.IDs that no task of got has, each once:
// those whose due times a Store reports to p.Later.
func (p ClaimParams) Unclaimed(got []*Task) []string {
	skip := make(map[string]bool, len(got)+len(p.IDs))
	for _, t := range got {
		skip[t.ID] = true
	}
	var rest []string
	for _, id := range p.IDs {
		if !skip[id] {
			skip[id] = true
			rest = append(rest, id)
		}
	}
	return rest
}

// ClaimLimit returns how many tasks p may claim, applying ClaimParams'
// rules, for backends.
func (p ClaimParams) ClaimLimit() int {
	n := p.Limit
	if n <= 0 {
		n = max(len(p.IDs), 1)
	}
	return min(n, MaxClaimLimit)
}

// Due says when a scheduler must next look at a live task, as of one
// version of it: its NextAttemptAt when PENDING, its LeaseUntil when
// IN_FLIGHT. Versions order the news of one task, so a scheduler that hears
// of a task from several sources (the API, a change feed, a resync) keeps
// the newest; a Version of 0 means unknown, and is older than any other.
type Due struct {
	ID      string
	At      time.Time
	Version int64
}

// Due returns when a scheduler must next look at t, as of its version.
func (t *Task) Due() Due {
	at := t.NextAttemptAt
	if t.Status == InFlight {
		at = t.LeaseUntil
	}
	return Due{ID: t.ID, At: at, Version: t.Version}
}

// CreateResult is the outcome of one task of TaskCreateBatch: the task as
// stored, and whether this call created it, or Err (ErrConflict,
// ErrInvalid) when it was refused.
type CreateResult struct {
	Task    *Task
	Created bool
	Err     error
}

// Finish records the outcome of one claimed attempt.
type Finish struct {
	TaskID  string
	Version int64   // the version TaskClaim returned; a mismatch is ErrLeaseLost
	Attempt Attempt // appended to the attempt log (its TaskID is set from Finish's); an AttemptNumber of 0 logs nothing, for a task given up without a call

	Status        Status    // Succeeded, Pending (retry), Exhausted or Failed; another is ErrInvalid
	NextAttemptAt time.Time // when Status is Pending (zero means Now); otherwise ignored
	// Held hands the task back PENDING without its attempt: the attempt
	// the claim counted was never sent (retryd's admission held it back
	// from an overloaded target), so the task's AttemptNumber goes back
	// to what it was before the claim, as a lease taken back unsent does
	// (see SendHorizon). It needs Status Pending and an Attempt with
	// AttemptNumber 0 (nothing logged); otherwise it is ErrInvalid.
	Held       bool
	PrevDelay  time.Duration
	LastError  string
	LastStatus int
	Now        time.Time
}

// Transition asks TaskTransition to move a task between states: cancel
// (To CANCELLED: FinishedAt set to Now) or redrive (To PENDING: the
// attempt count, PrevDelay, LastError and LastStatus reset, NextAttemptAt
// and BudgetStart set to Now, FinishedAt cleared; the attempt log is kept
// and the new attempts are appended to it). Another To is ErrInvalid.
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
	// or ErrConflict if it does not. The new task is PENDING, AttemptNumber
	// 0, Version 1, UpdatedAt = CreatedAt. Zero fields take defaults: ID and
	// IdempotencyKey NewID(), CreatedAt the current time, NextAttemptAt and
	// BudgetStart CreatedAt. An ID already used (by any tenant) is
	// ErrConflict. The Store does not check that PolicyID is registered.
	//
	// A task given with LeaseUntil set and due by CreatedAt asks to be
	// created claimed, as TaskClaim at CreatedAt with that lease would
	// leave it (see CreatedBy): a scheduler about to claim the task
	// it is handed saves the claim's round trip and commit. It is not
	// announced on the change feed: it is nobody else's to claim. A Store
	// that does not do this creates the task PENDING as above, and says so
	// in stored.Status; so does every store for a repeat.
	TaskCreate(ctx context.Context, t *Task) (stored *Task, created bool, err error)
	// TaskCreateBatch creates several tasks in one durable step: results[i]
	// is what TaskCreate(ts[i]) would have answered, as if the tasks were
	// created one after another in order (a task repeating the idempotency
	// key of an earlier one is its repeat, or ErrConflict). A task the store
	// refuses does not stop the others. err is for failures of the whole
	// call: results is then nil, and nothing is written by a store whose
	// batch is one transaction (SQLite, PostgreSQL); on Redis some of the
	// tasks may have been created. Either way, repeating the call with the
	// same idempotency keys is safe: what was created answers as a repeat.
	TaskCreateBatch(ctx context.Context, ts []*Task) (results []CreateResult, err error)
	// TaskGet returns one task of the tenant, or ErrNotFound.
	TaskGet(ctx context.Context, tenant, id string) (*Task, error)
	// TaskList lists tasks matching f, newest first (the reverse of the
	// order TaskCreate stored them in), one page at a time. An empty Tenant
	// lists every tenant's (the scheduler uses this to rebuild its heap).
	// Paging never repeats or skips a task, even while tasks are created;
	// a task whose status changes between pages may enter or leave a
	// status-filtered list. A store that matches part of a filter task by
	// task as it walks (Redis: TargetHost, a PolicyID without a Tenant, one
	// of PENDING and IN_FLIGHT without the other) bounds the work of one
	// call, so a page may hold fewer than Limit tasks, or none, and still
	// have a next token: only an empty next token ends the list.
	TaskList(ctx context.Context, f TaskFilter, page Page) (items []*Task, next string, err error)
	// TaskTransition applies a cancel or redrive, returning the task after it:
	// ErrNotFound when the tenant has no such task, ErrConflict when its
	// state is not in tr.From. The Version is bumped.
	TaskTransition(ctx context.Context, tr Transition) (*Task, error)

	// TaskClaim atomically leases up to p.Limit tasks that are due: PENDING
	// with NextAttemptAt ≤ Now, or IN_FLIGHT with LeaseUntil ≤ Now (a crashed
	// worker's; the lost attempt is counted and logged with
	// LeaseExpiredMessage as its ErrorMessage and as the task's LastError;
	// a store that knows the attempt was never sent (see SendHorizon) has
	// put the task back to PENDING first, uncharged).
	// Each claimed task is IN_FLIGHT until Now+Lease, its AttemptNumber is
	// the attempt about to be made (it may exceed the policy's maximum after
	// lost attempts: the caller then finishes it without a call), its
	// Version is new, and its NextAttemptAt still says when it was due, so
	// that the caller can measure dispatch lag. Tasks are claimed earliest
	// due first, an expired lease being due at its LeaseUntil. No task is
	// claimed by two concurrent calls.
	TaskClaim(ctx context.Context, p ClaimParams) ([]*Task, error)
	// TaskDue calls each with every live task (PENDING or IN_FLIGHT), of
	// every tenant, that this store claims from, and when a scheduler must
	// next look at it (see Due), each time and version read together. It
	// reads no request and no other field, DueBatch tasks at
	// a time, so that a scheduler rebuilds its heap from it far more
	// cheaply than from TaskList. A task that changes during the walk may
	// be reported as it was or as it became, and one created during it may
	// be missed: whoever changes a task tells the scheduler. each must not
	// call the store.
	TaskDue(ctx context.Context, each func(Due)) error
	// TaskFinish records the outcomes of claimed attempts in one durable
	// step; each finished task's Version goes up by exactly one, so that
	// the caller knows the version of the news it files. errs[i] is ErrLeaseLost when fs[i]'s version is stale or the
	// task is not IN_FLIGHT, ErrNotFound when there is no such task, and
	// ErrInvalid when its Status is not a finishing one; nothing of such an
	// item is written. A lease that ran out but was not reclaimed yet still
	// finishes. The task's lease is cleared, its Version bumped, FinishedAt
	// set when its Status is terminal. Items apply in order, so a second
	// Finish of one task in one call is ErrLeaseLost. err is for failures of
	// the whole call (errs is then nil and nothing is written).
	TaskFinish(ctx context.Context, fs []Finish) (errs []error, err error)

	// AttemptList returns a task's attempt log, oldest first, or ErrNotFound
	// when the tenant has no such task.
	AttemptList(ctx context.Context, tenant, taskID string, page Page) (items []*Attempt, next string, err error)
	// TaskCounts returns the number of tasks in each state, every tenant's,
	// for metrics. Every Status is a key, zero counts included.
	TaskCounts(ctx context.Context) (map[Status]int64, error)
	// TenantCounts returns the number of tenant's tasks in each state, for
	// the operator console, which asks every few seconds: every Status is a
	// key, zero counts included, and a tenant without tasks has all zeros.
	// Like TaskCounts it reads counts the writes keep in step, never the
	// tasks themselves, so its cost does not grow with the tenant's tasks.
	// Purged tasks are not counted.
	TenantCounts(ctx context.Context, tenant string) (map[Status]int64, error)

	// Ping reports whether the store is reachable, for /readyz.
	Ping(ctx context.Context) error
	// Close releases the store's resources; later calls return ErrClosed.
	// Calling Close again returns nil.
	Close() error
}

// Feed is implemented by the stores that several retryd instances share
// (PostgreSQL, Redis): their change feed, through which each instance's
// scheduler hears of the tasks another instance made due, without waiting
// for a poll. A store one process owns (SQLite) has no other writer to hear
// of and does not implement it; callers find out with a type assertion,
// st.(store.Feed).
type Feed interface {
	// Listen calls wake for every task that any instance sharing the
	// store (this one included) made due, or due sooner: created
	// (TaskCreate, TaskCreateBatch; a repeat creates nothing), finished
	// with a retry (TaskFinish to PENDING) or redriven (TaskTransition to
	// PENDING), once the change has committed, with the task's ID, its
	// NextAttemptAt at millisecond precision and its Version after the
	// change: what TaskGet would then answer. Other changes (claims,
	// finishes that end a task, cancels) are not reported. A store that
	// claims from part of the data only (Redis with claim partitions)
	// reports the tasks of that part.
	//
	// wake runs on Listen's goroutine, one call at a time, in the order
	// the changes committed, and must not block for long or call the
	// store. Reports are hints, at most once each: a claim may still find
	// the task taken or not due.
	//
	// onListening, when not nil, is called each time the feed is in
	// place: once at first, and again after each reconnection. Changes
	// made while the feed was down are not reported, so a caller that
	// must not miss one rescans the store (TaskDue) when onListening is
	// called again. It runs on Listen's goroutine and should return
	// quickly.
	//
	// Listen keeps the feed, reconnecting as long as it takes, until ctx
	// ends, when it returns an error wrapping ctx's, or the store is
	// closed, when it returns one wrapping ErrClosed (at once if it was
	// closed before the call). Any number of Listens may run at once.
	Listen(ctx context.Context, wake func(Due), onListening func()) error
}

// SendHorizon is implemented by the stores that take a dead process's
// leases back without charging the attempts it never sent: SQLite opened
// Exclusive (retryd's), and PostgreSQL and Redis for an instance that
// joined (see Instances). A scheduler calls MaySend before every attempt
// it sends, and sends only once it returned nil.
//
// Why it is needed: a scheduler claims a task a little before it is due
// (so that the claim's commit does not delay the attempt) and sends it at
// its due time. A process that dies in between holds leases on tasks it
// never sent, and nothing in the task says so: the claim is the last write
// of an attempt, and a write at the moment of sending would double the
// writes of every attempt. The horizon costs much less: it is one value
// per process, "every attempt this process may have sent was due no later
// than H", raised a little past the due time each time an attempt due
// beyond it is about to go (attempts due within a few milliseconds of each
// other share one raise). Whoever takes a lease back from a dead holder
// then compares: a task due after the holder's last horizon was never
// sent, since the holder sends only tasks due within its horizon, so it
// goes back to PENDING, due as before, with its attempt count, attempt log
// and LastError as they were before the claim; a task due at or before it
// may have reached its target, and its lost attempt is charged and logged
// (LeaseExpiredMessage). The horizon is kept where the holder's death
// cannot lose it: the kernel's cache of the lock file for SQLite (trusted
// only by the same boot of the machine, so that a power loss, which can
// lose it, charges every lease as before), the instance's row or hash for
// PostgreSQL and Redis, written before MaySend returns. Times are the
// holder's own clock against the task's due time, which it compared to the
// same clock before sending: clocks of other machines do not enter.
type SendHorizon interface {
	// MaySend returns once the store would count the attempt of t, as
	// TaskClaim returned it, as possibly sent should this process die:
	// the caller sends only after it returned nil. It is cheap when t's
	// NextAttemptAt is within the horizon already. An error means the
	// attempt must not be sent (ErrLeaseLost: t's holder is no longer
	// this process's instance, its leases were taken back).
	MaySend(ctx context.Context, t *Task) error
}

// Instances is implemented by the stores several retryd instances share
// (PostgreSQL, Redis), so that a dead instance's leases are taken back
// within seconds instead of when they run out. Each instance joins, then
// beats about every second; every lease it takes names it (Task.Holder);
// any instance calls ReclaimDead about as often, which takes back the
// leases of every instance that stopped beating a few seconds ago, as
// SendHorizon says (uncharged when never sent). While its instance beats,
// a lease is extended (up to twice its length), so an attempt to a slow
// target keeps it. Fencing is unchanged: taking a lease back bumps the
// task's Version, so its old holder can never record an outcome.
type Instances interface {
	// Join registers this Store as a new instance alive at now and
	// returns its ID: the Holder of the leases its claims take from then
	// on. Joining again replaces the instance with a new one.
	Join(ctx context.Context, now time.Time) (id string, err error)
	// Beat records that the instance is alive at now, and extends each
	// lease it holds that would end before now+lease/2 to now+lease, as
	// long as the lease was taken less than a lease ago: a lease lasts up
	// to two from its claim while its instance beats, and a lease its
	// instance does not know it holds (a claim whose answer was lost, a
	// finish a store's crash undid) still runs out. If
	// the instance was found dead meanwhile (its leases taken back), Beat
	// joins as a new instance and returns an error wrapping ErrLeaseLost:
	// the attempts still running under the old one will not be recorded.
	Beat(ctx context.Context, now time.Time, lease time.Duration) error
	// ReclaimDead takes back the leases of every instance whose last beat
	// is older than now-after and forgets the instance. A task due after
	// the dead instance's send horizon goes back to PENDING uncharged; the
	// others' leases end at now, to be claimed again at once with their
	// lost attempts charged. It returns the tasks it made due, which it
	// also reports on the change feed.
	ReclaimDead(ctx context.Context, now time.Time, after time.Duration) ([]Due, error)
	// Leave forgets the instance, on a clean shutdown once its attempts
	// are recorded; its claims name no holder from then on.
	Leave(ctx context.Context) error
}

// Fleet is implemented by the stores with Instances (PostgreSQL, Redis):
// how many instances share the store, so that each takes its part of what
// the fleet does together (retryd divides its host limiters' increase by
// it). Callers find it with a type assertion, st.(store.Fleet).
type Fleet interface {
	// InstancesAlive returns how many instances beat (Instances.Join or
	// Beat) after now-within and have not left: this one included once
	// it joined.
	InstancesAlive(ctx context.Context, now time.Time, within time.Duration) (int, error)
}

// MaxPurgeLimit is the most tasks one TaskPurge deletes.
const MaxPurgeLimit = 1000

// Purger is implemented by every store (SQLite, PostgreSQL, Redis): what
// retryd's retention sweep deletes old tasks with, and what its blob sweeps
// ask before deleting a body. The scheduler and the API need neither, so
// it is not part of Store; callers find it with a type assertion,
// st.(store.Purger).
type Purger interface {
	// TaskPurge deletes up to limit terminal tasks (SUCCEEDED, EXHAUSTED,
	// FAILED, CANCELLED), of every tenant, whose FinishedAt is before
	// before (a terminal task does not change after it, but for a redrive,
	// which makes it live again), the oldest first, with their attempt
	// logs. It returns the distinct non-empty BodyRefs the deleted tasks
	// held, sorted, for the caller to delete the blobs no other task holds
	// (BodyRefsInUse), and the number of tasks deleted; fewer than limit
	// means that no more were due when it looked. limit ≤ 0 or over
	// MaxPurgeLimit means MaxPurgeLimit. Live tasks are never deleted.
	//
	// A purged task is gone: TaskGet answers ErrNotFound, lists and
	// TaskCounts leave it out, AttemptList answers ErrNotFound, and its
	// idempotency key is free again: a TaskCreate with it creates a new
	// task, whatever its request hash. (Retention is what bounds how long
	// a key deduplicates: it must outlast the time clients retry a
	// request for.)
	//
	// SQLite and PostgreSQL delete the batch in one transaction. Redis
	// deletes each partition's part of it in one script run; a call that
	// fails may have deleted some of them, and calling again finishes the
	// job.
	TaskPurge(ctx context.Context, before time.Time, limit int) (refs []string, n int, err error)
	// BodyRefsInUse returns which of refs some task (of any tenant, in any
	// state) holds as its BodyRef: true for those, absent for the others.
	// A task created after it looked may hold one it did not report.
	BodyRefsInUse(ctx context.Context, refs []string) (map[string]bool, error)
}

// PurgeLimit returns the number of tasks a TaskPurge of limit deletes at
// most, applying TaskPurge's rules, for backends.
func PurgeLimit(limit int) int {
	if limit <= 0 || limit > MaxPurgeLimit {
		return MaxPurgeLimit
	}
	return limit
}

// Created returns the task a store holds once TaskCreate has stored t (its
// ID, times and defaults already filled in): PENDING at version 1, times cut
// to the millisecond in UTC, no headers as nil and no body as empty. Stores
// return it from TaskCreate instead of reading the task back.
func Created(t *Task) *Task {
	out := &Task{
		ID: t.ID, Tenant: t.Tenant, IdempotencyKey: t.IdempotencyKey, RequestHash: t.RequestHash,
		TargetURL: t.TargetURL, Method: t.Method, Headers: maps.Clone(t.Headers), Body: bytes.Clone(t.Body),
		BodyBinary: t.BodyBinary, BodyRef: t.BodyRef, BodySize: t.BodySize, PolicyID: t.PolicyID, Status: Pending, Version: 1,
		NextAttemptAt: toMillis(t.NextAttemptAt), BudgetStart: toMillis(t.BudgetStart),
		CreatedAt: toMillis(t.CreatedAt), UpdatedAt: toMillis(t.CreatedAt),
	}
	if len(out.Headers) == 0 {
		out.Headers = nil
	}
	if out.Body == nil {
		out.Body = []byte{}
	}
	return out
}

// CreateClaimer is a Store that creates claimed the tasks that ask for it
// (see TaskCreate); a caller asks only a Store that is one, since asking
// costs it a worker held through the create.
type CreateClaimer interface {
	Store
	// CreatesClaimed marks the Store as one.
	CreatesClaimed()
}

// DueAtCreate reports whether new task t is due by its creation, at the
// millisecond the store keeps: the tasks a caller may ask to be created
// claimed.
func (t *Task) DueAtCreate() bool {
	return !toMillis(t.NextAttemptAt).After(toMillis(t.CreatedAt))
}

// ClaimAtCreate reports whether new task t (its defaults filled in) is to
// be created claimed, as TaskCreate says.
func (t *Task) ClaimAtCreate() bool {
	return !t.LeaseUntil.IsZero() && t.DueAtCreate()
}

// CreatedBy returns the task a store holds once it has created t: Created(t)
// or, when t.ClaimAtCreate, that task claimed by holder: IN_FLIGHT, its
// first attempt counted (AttemptNumber 1), at version 2, leased until
// t.LeaseUntil, as TaskClaim at CreatedAt would have left it.
func CreatedBy(t *Task, holder string) *Task {
	out := Created(t)
	if t.ClaimAtCreate() {
		out.Status, out.AttemptNumber, out.Version = InFlight, 1, 2
		out.LeaseUntil, out.Holder = toMillis(t.LeaseUntil), holder
	}
	return out
}

// CeilMillis rounds t up to the millisecond, the precision every store
// keeps: a due time rounded so is never early, where one cut down would be.
func CeilMillis(t time.Time) time.Time {
	if r := t.Truncate(time.Millisecond); !r.Equal(t) {
		return r.Add(time.Millisecond)
	}
	return t
}

// toMillis cuts t to the millisecond, in UTC; the zero time stays zero.
func toMillis(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return time.UnixMilli(t.UnixMilli()).UTC()
}

// CreateDefaults fills in what TaskCreate defaults: a new ID and idempotency
// key when empty, CreatedAt now when zero, cut to the millisecond, and
// NextAttemptAt and BudgetStart at CreatedAt when zero, and BodySize at
// len(Body) for an inline body. A task without a tenant is refused with
// ErrInvalid, and so is one with both a Body and a BodyRef, or a BodySize
// that does not fit (see Task). Stores call it on their own copy of the
// task they are given.
func (t *Task) CreateDefaults() error {
	if t.Tenant == "" {
		return fmt.Errorf("empty tenant: %w", ErrInvalid)
	}
	if err := t.checkBody(); err != nil {
		return err
	}
	if t.ID == "" {
		t.ID = NewID()
	}
	if t.IdempotencyKey == "" {
		t.IdempotencyKey = NewID()
	}
	if t.CreatedAt.IsZero() {
		t.CreatedAt = time.Now()
	}
	t.CreatedAt = t.CreatedAt.Truncate(time.Millisecond)
	if t.NextAttemptAt.IsZero() {
		t.NextAttemptAt = t.CreatedAt
	}
	if t.BudgetStart.IsZero() {
		t.BudgetStart = t.CreatedAt
	}
	return nil
}

// checkBody checks the body fields of a new task and sets BodySize for an
// inline body.
func (t *Task) checkBody() error {
	switch {
	case t.BodyRef != "" && len(t.Body) > 0:
		return fmt.Errorf("both a body and a body reference: %w", ErrInvalid)
	case t.BodySize < 0:
		return fmt.Errorf("body size %d: %w", t.BodySize, ErrInvalid)
	case t.BodyRef == "" && t.BodySize != 0 && t.BodySize != int64(len(t.Body)):
		return fmt.Errorf("body size %d for an inline body of %d bytes: %w", t.BodySize, len(t.Body), ErrInvalid)
	case t.BodyRef == "":
		t.BodySize = int64(len(t.Body))
	}
	return nil
}
