package store

import (
	"context"
	"time"
)

// Destination is a tenant's named target, as a store keeps it: its
// settings are Spec, the destination's JSON with its secrets already
// sealed, which the store keeps as bytes and never reads. Unlike a Policy a
// Destination changes: each change bumps Version, and a change names the
// Version it was made from, so that two writers cannot lose each other's
// change.
type Destination struct {
	Tenant string
	ID     string
	// Spec is the destination's settings, opaque to the store.
	Spec []byte
	// RequestHash is a digest of the request that created it, to tell an
	// idempotent repeat of DestinationCreate from a conflicting one (Spec
	// cannot: its sealed secrets differ on every write).
	RequestHash string
	Version     int64 // 1 when created; bumped by every change
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// Destinations is implemented by every store (SQLite, PostgreSQL, Redis):
// where retryd keeps its destinations. The scheduler reads them at each
// attempt (through a cache), the API writes them. Callers find it with a
// type assertion, st.(store.Destinations).
//
// Every method refuses an empty tenant or ID with ErrInvalid, a list's
// empty tenant too: no destination has one, and a caller that passes one
// has lost it somewhere. A deleted destination's ID is free again: a
// create makes it anew, at Version 1.
type Destinations interface {
	// DestinationCreate stores d at Version 1, CreatedAt and UpdatedAt
	// its CreatedAt (the current time when zero). An existing (Tenant, ID)
	// is returned with created false when its RequestHash equals d's, and
	// is ErrConflict otherwise. An empty Tenant or ID is ErrInvalid.
	DestinationCreate(ctx context.Context, d *Destination) (stored *Destination, created bool, err error)
	// DestinationUpdate replaces the Spec (and RequestHash) of the
	// destination (d.Tenant, d.ID) whose Version is d.Version, bumps its
	// Version and sets UpdatedAt to d.UpdatedAt (the current time when
	// zero), and returns it as stored. ErrNotFound when there is no such
	// destination, ErrConflict when its Version is not d.Version.
	DestinationUpdate(ctx context.Context, d *Destination) (*Destination, error)
	// DestinationGet returns one destination, or ErrNotFound.
	DestinationGet(ctx context.Context, tenant, id string) (*Destination, error)
	// DestinationList lists a tenant's destinations by ID.
	DestinationList(ctx context.Context, tenant string, page Page) (items []*Destination, next string, err error)
	// DestinationDelete deletes the destination whose Version is version
	// (0: whatever its version). ErrNotFound when there is no such
	// destination, ErrConflict when its Version differs. The store does
	// not look at tasks: the caller checks that none names it.
	DestinationDelete(ctx context.Context, tenant, id string, version int64) error
}

// Limits is implemented by the stores several retryd instances share
// (PostgreSQL, Redis): the rate and in-flight limits of destinations, held
// for the whole fleet. A process that owns its store keeps them in memory
// instead (limits.Local, package service/destination/limits). Callers find
// it with a type assertion, st.(store.Limits).
//
// Rates follow the generic cell rate algorithm: a key's theoretical
// arrival time (TAT) moves on by 1/PerSecond with each grant, and a grant
// is made while TAT is no further ahead of now than Burst-1 intervals plus
// MaxWait. A caller that is refused is given a place in line (RetryAt):
// each refusal's place is 1/PerSecond after the previous one's, and after
// the tokens already promised, so that refused callers come back paced at
// the rate, not all at once. Package limits states the rules exactly, and
// its limitstest pins them for every implementation.
//
// Every time is the caller's (LimitParams.Now), never a server's, taken
// to the microsecond: callers on several machines need clocks that agree
// to well within the intervals they limit.
type Limits interface {
	// LimitAcquire asks for room for one attempt under p: a rate token
	// and an in-flight slot, both or neither (when both would refuse,
	// the answer is the rate's, which carries a place in line). It never
	// blocks on the limit: a refusal is an answer, not an error. Params
	// out of range are ErrInvalid (see LimitParams). A call that fails
	// after the store granted it (a lost reply) leaves its slot taken
	// until Hold ends it.
	LimitAcquire(ctx context.Context, p LimitParams) (LimitGrant, error)
	// LimitRelease frees the in-flight slot a grant took under key.
	// Releasing a slot that expired or was released already, or an empty
	// slot, is not an error.
	LimitRelease(ctx context.Context, key, slot string) error
}

// LimitParams asks Limits.LimitAcquire for room for one attempt. Key and
// Now are required.
type LimitParams struct {
	Key string // one per destination: "tenant/destinationID"
	Now time.Time
	// PerSecond is the rate limit; 0 means none, < 0 is invalid. Burst is
	// how many attempts may go at once after a quiet spell; < 1 means 1.
	PerSecond float64
	Burst     int
	// MaxWait is how far ahead of now a rate token may be granted: the
	// caller then waits LimitGrant.Wait before it sends. < 0 means 0.
	MaxWait time.Duration
	// MaxInFlight caps the slots taken and neither released nor expired;
	// 0 means no cap (and no slot is taken), < 0 is invalid.
	MaxInFlight int
	// Hold is how long a slot lasts when its holder never releases it (a
	// process that died): the attempt's bound and a margin. A slot taken
	// at Now counts for the calls whose Now is before Now+Hold. Required
	// with MaxInFlight > 0.
	Hold time.Duration
}

// LimitGrant is LimitAcquire's answer.
type LimitGrant struct {
	OK bool
	// Wait, when OK, is how long the caller waits before it sends: the
	// rate token granted is that far ahead of now (at most MaxWait).
	Wait time.Duration
	// Slot, when OK and MaxInFlight > 0, names the in-flight slot taken,
	// for LimitRelease; "" otherwise.
	Slot string
	// Reason, when refused, is LimitRate or LimitInFlight.
	Reason string
	// RetryAt, when refused by the rate, is the caller's place in line:
	// when to ask again. Zero when refused for room in flight, which a
	// store cannot foresee.
	RetryAt time.Time
}

// Reasons of a LimitGrant refused.
const (
	LimitRate     = "rate limit"
	LimitInFlight = "in flight"
)
