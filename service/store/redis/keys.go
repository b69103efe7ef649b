package redis

import (
	"encoding/hex"
	"hash/fnv"
	"strconv"
	"strings"
)

// keys names the store's keys under one prefix. Every key a script touches
// belongs to one partition and starts with that partition's base, whose
// hash tag {p:N} puts them all in one Redis Cluster slot; the tenant-level
// policy and destination keys share the tag {t:…} of their tenant instead.
// The keys outside both (configuration, creation counter, ID and
// idempotency records) are only ever read or written one at a time.
type keys struct {
	prefix string
	bases  []string // bases[p] is the prefix of partition p's keys
}

func newKeys(prefix string, partitions int) keys {
	k := keys{prefix: prefix, bases: make([]string, partitions)}
	for p := range k.bases {
		k.bases[p] = prefix + "{p:" + strconv.Itoa(p) + "}:"
	}
	return k
}

// config holds the store's settings, written by the first Open.
func (k keys) config() string { return k.prefix + "config" }

// seq counts task creations: list order and page tokens follow it.
func (k keys) seq() string { return k.prefix + "seq" }

// id records which tenant, policy and partition a task ID belongs to.
func (k keys) id(id string) string { return k.prefix + "id:" + id }

// idem records the task an idempotency key of a tenant names.
func (k keys) idem(tenant, key string) string {
	return k.prefix + "idem:" + strconv.Itoa(len(tenant)) + ":" + tenant + key
}

// The keys of partition p: PENDING tasks scored by next attempt (ms),
// IN_FLIGHT tasks scored by lease expiry (ms), the count of tasks per
// status, and each task's hash and attempt log.
func (k keys) due(p int) string             { return k.bases[p] + "due" }
func (k keys) lease(p int) string           { return k.bases[p] + "lease" }
func (k keys) counts(p int) string          { return k.bases[p] + "counts" }
func (k keys) task(p int, id string) string { return k.bases[p] + "t:" + id }
func (k keys) log(p int, id string) string  { return k.bases[p] + "a:" + id }

// held is partition p's hash of the holders of its IN_FLIGHT tasks'
// leases (store.Instances): task ID → instance ID.
func (k keys) held(p int) string { return k.bases[p] + "held" }

// beats is the sorted set of the live instances by their last beat (ms),
// and sendTo the hash of their send horizons (ms); one hash tag keeps them
// in one slot, for the scripts that read both.
func (k keys) beats() string  { return k.prefix + "{inst}:beats" }
func (k keys) sendTo() string { return k.prefix + "{inst}:sendto" }

// tenantCounts is partition p's hash of the number of each tenant's tasks
// per status, for TenantCounts: its fields are tenantCountField's.
func (k keys) tenantCounts(p int) string { return k.bases[p] + "tcounts" }

// tenantCountField names tenant's count of status in a tenantCounts hash:
// the status, which holds no colon, then a colon and the tenant. The
// scripts make the same names.
func tenantCountField(status, tenant string) string { return status + ":" + tenant }

// For the retention sweep and the blob sweeps (store.Purger): done is the
// sorted set of partition p's terminal task IDs by when they ended (ms),
// refs the hash of each body reference its tasks hold → how many hold it,
// and purged the list of records TaskPurge still has to release (see
// purge.go).
func (k keys) done(p int) string   { return k.bases[p] + "done" }
func (k keys) refs(p int) string   { return k.bases[p] + "refs" }
func (k keys) purged(p int) string { return k.bases[p] + "purged" }

// Scopes of the list indexes: every task of a partition, a tenant's, or a
// tenant's of one policy.
const (
	scopeAll = iota
	scopeTenant
	scopePolicy
)

// index is the sorted set of partition p's tasks in state (stateOf) of one
// scope, scored by creation sequence. The tenant's name ends the key, or is
// length-prefixed before the policy's, so no two scopes share a key.
func (k keys) index(p int, state string, scope int, tenant, policy string) string {
	base := k.bases[p] + "l:" + state
	switch scope {
	case scopeTenant:
		return base + ":t:" + tenant
	case scopePolicy:
		return base + ":tp:" + strconv.Itoa(len(tenant)) + ":" + tenant + policy
	}
	return base
}

// indexes returns the three index keys a task of l in state is listed in.
func (k keys) indexes(l loc, state string) [3]string {
	return [3]string{
		k.index(l.part, state, scopeAll, "", ""),
		k.index(l.part, state, scopeTenant, l.tenant, ""),
		k.index(l.part, state, scopePolicy, l.tenant, l.policy),
	}
}

// policies is a tenant's hash of policies (ID → createdAt and spec), and
// policyIDs the sorted set that pages through them by ID.
func (k keys) policies(tenant string) string  { return k.tenantBase(tenant) + "pol:" + tenant }
func (k keys) policyIDs(tenant string) string { return k.tenantBase(tenant) + "polids:" + tenant }

// destination is the hash of one destination of tenant (its spec, request
// hash, version and times), and destinationIDs the sorted set, all scored
// 0, that pages through the tenant's destinations by ID. Both share the
// tenant's hash tag, with its policies'. The tenant's name is
// length-prefixed before the ID, so no two destinations share a key.
func (k keys) destination(tenant, id string) string {
	return k.tenantBase(tenant) + "dst:" + strconv.Itoa(len(tenant)) + ":" + tenant + id
}
func (k keys) destinationIDs(tenant string) string { return k.tenantBase(tenant) + "dstids:" + tenant }

func (k keys) tenantBase(tenant string) string {
	h := fnv.New64a()
	h.Write([]byte(tenant))
	return k.prefix + "{t:" + hex.EncodeToString(h.Sum(nil)) + "}:"
}

// wake is the Pub/Sub channel of partition p's wake-ups. Channels are not
// keys: Redis Cluster delivers a message to every node's subscribers.
func (k keys) wake(p int) string { return k.prefix + "wake:" + strconv.Itoa(p) }

// partitionOf returns the partition of the tasks of tenant and policy:
// FNV-1a of both, modulo n. It must never change: stored tasks stay where
// it put them.
func partitionOf(tenant, policy string, n int) int {
	h := fnv.New64a()
	h.Write([]byte(tenant))
	h.Write([]byte{0})
	h.Write([]byte(policy))
	return int(h.Sum64() % uint64(n))
}

// validPrefix reports whether prefix leaves the hash tags alone: a brace
// in it would become the tag of every key.
func validPrefix(prefix string) bool { return !strings.ContainsAny(prefix, "{}") }
