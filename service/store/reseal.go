package store

import (
	"context"
	"strings"

	"github.com/retrykit/retry/service/destination/secrets"
)

// SealedPrefix begins every value package secrets seals (its tokens,
// "sec:v1:<key id>:…"). A store looks for it to find the tasks whose
// headers hold a sealed value, knowing nothing else of secrets.
const SealedPrefix = secrets.Prefix

// ResealBatch is how many tasks, or destinations, a reseal walk reads at a
// time: enough to keep round trips few, few enough that a batch read
// before it is changed is seldom stale.
const ResealBatch = 256

// HeaderChange is what TaskHeadersReseal calls with a task's headers: it
// returns the headers to write and whether they changed. It may change h
// and return it: h is the walk's own copy.
type HeaderChange func(tenant, taskID string, h map[string]string) (out map[string]string, changed bool, err error)

// TaskHeaderResealer is implemented by every store (SQLite, PostgreSQL,
// Redis): it finds the tasks whose headers hold sealed values, so that a
// key rotation (`retryd secrets rotate-key`) can seal them again under the
// current key. Callers find it with a type assertion,
// st.(store.TaskHeaderResealer).
type TaskHeaderResealer interface {
	// TaskHeadersReseal walks every task of every tenant, in any status,
	// that has a header whose value begins with SealedPrefix, reading
	// ResealBatch of them at a time, and calls change with its headers.
	// When change reports them changed, it writes back the headers change
	// returned and nothing else: the task's Version, status and times stay
	// as they are, since its headers still open to what they were, and a
	// worker holding its lease must still be able to finish it. n counts
	// the tasks written.
	//
	// Each write is conditional on the task's headers being still those
	// change was given. Nothing else changes a task's headers, so the
	// condition only fails for a task deleted meanwhile (purged), whose
	// write is then skipped, not made; a condition on Version instead
	// would fail for every busy task, whose claims and finishes bump it.
	//
	// Tasks created during the walk may or may not be visited. change is
	// called once at a time, outside any transaction, so it may use the
	// store. An error of change stops the walk and is returned, wrapped;
	// the headers change had changed before it are written all the same,
	// and n counts them.
	TaskHeadersReseal(ctx context.Context, change HeaderChange) (n int, err error)
}

// DestinationWalker is implemented by every store (SQLite, PostgreSQL,
// Redis): it lists the destinations of all tenants, which
// Destinations.DestinationList cannot, for a key rotation to seal their
// secrets again. Callers find it with a type assertion,
// st.(store.DestinationWalker).
type DestinationWalker interface {
	// DestinationEach calls each with the tenant and ID of every
	// destination of every tenant, once. It reads up to ResealBatch of
	// them before it calls each for them, once at a time and outside any
	// transaction, so each may read, change or delete the destination it
	// is given. A destination created or deleted during the walk may or
	// may not be visited; one deleted before its turn may still be given,
	// and each then finds it gone. An error of each stops the walk and is
	// returned, wrapped.
	DestinationEach(ctx context.Context, each func(tenant, id string) error) error
}

// HasSealed reports whether a value of h begins with SealedPrefix: the
// exact test of TaskHeadersReseal, after whatever coarser filter a store
// applies where it reads.
func HasSealed(h map[string]string) bool {
	for _, v := range h {
		if strings.HasPrefix(v, SealedPrefix) {
			return true
		}
	}
	return false
}
