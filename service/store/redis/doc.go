// Package redis is retryd's Redis store: a store.Store on a Redis server
// (7.0 or later) or Redis Cluster, through go-redis, that several retryd
// instances share.
//
// # Durability: what the server must be configured with
//
// Redis acknowledges a write once it is in memory. What survives a restart
// is what its persistence kept, so the store is only as durable as the
// server's configuration:
//
//   - appendonly yes with appendfsync always: every change this store
//     acknowledged is on disk before the acknowledgement, as the
//     store.Store contract asks; nothing is lost to a crash of Redis or of
//     the machine. Each write waits for an fsync.
//   - appendonly yes with appendfsync everysec (Redis's default once the
//     AOF is on, and the usual choice): Redis writes every change to the
//     file before acknowledging it, so a crash or kill -9 of Redis loses
//     nothing (unless a slow disk made it postpone writes, for up to 2 s,
//     which it logs); a crash of the machine or OS loses the last second or
//     two of acknowledged changes.
//   - no AOF (RDB snapshots only, or no persistence, as on the test server
//     of this repository): a restart of Redis loses every change since the
//     last snapshot (everything, without snapshots). Then created tasks
//     disappear although their clients were answered 201, policies vanish,
//     idempotency keys are forgotten (a repeated request makes a second
//     task), finished tasks run again (outcomes lost), and claimed tasks
//     return to an earlier state (attempts repeated).
//
// Open logs a warning when the server has no AOF, or never syncs it. With
// replicas, a failover can lose what the replica had not received yet:
// Redis replication is asynchronous.
//
// # Layout
//
// Tasks hash into partitions (WithPartitions, DefaultPartitions) by tenant
// and policy (FNV-1a, see Store.Partition). Each partition's keys share the
// hash tag {p:N}, so that they are in one Redis Cluster slot:
//
//	<prefix>{p:N}:due        sorted set of PENDING task IDs by next attempt (ms)
//	<prefix>{p:N}:lease      sorted set of IN_FLIGHT task IDs by lease expiry (ms)
//	<prefix>{p:N}:counts     hash of status → number of tasks, for TaskCounts
//	<prefix>{p:N}:tcounts    hash of "<status>:<tenant>" → number of the tenant's
//	                         tasks in that status, for TenantCounts
//	<prefix>{p:N}:t:<id>     hash of a task's fields
//	<prefix>{p:N}:a:<id>     list of a task's attempts, the latest WithAttemptLogCap
//	<prefix>{p:N}:l:<state>… sorted sets of task IDs by creation order, for TaskList:
//	                         per state (LIVE = PENDING or IN_FLIGHT, or a terminal
//	                         status), for all tenants, one tenant, one tenant's policy
//	<prefix>{p:N}:done       sorted set of terminal task IDs by when they ended (ms),
//	                         for TaskPurge
//	<prefix>{p:N}:refs       hash of body reference → number of tasks holding it,
//	                         for BodyRefsInUse
//	<prefix>{p:N}:purged     list of the ID and key records TaskPurge has yet to
//	                         release (empty but while it runs, or after it failed)
//	<prefix>{p:N}:held       hash of IN_FLIGHT task ID → the instance whose lease it
//	                         is (store.Instances), for beats and ReclaimDead
//	<prefix>{inst}:beats     sorted set of live instances by last beat (ms)
//	<prefix>{inst}:sendto    hash of instance → send horizon (ms, store.SendHorizon)
//
// Every script (lua/*.lua) names all the keys it touches in KEYS, and they
// all belong to one partition, or for policies and destinations to one
// tenant (<prefix>{t:<hash>}:pol:<tenant> and :polids:<tenant>; a hash per
// destination, :dst:<len(tenant)>:<tenant><id>, and :dstids:<tenant>), or
// for instances to {inst}: each runs in one slot, so the store works on
// Redis Cluster unchanged. Two exceptions: lua/leases.lua (a beat's lease
// extension, ReclaimDead) reads the held hash first and only then knows
// which task hashes to touch, so it names them from the partition's base;
// they are in the partition's slot all the same. And lua/createfast.lua,
// which a Store runs only on a server without cluster mode, writes the
// three records below with the tasks (see TaskCreateBatch). A claim moves
// due IDs from the due set to the lease set and bumps each task's version in
// one script run; the same script reclaims expired leases, logging the lost
// attempt; the finish script is fenced on each task's version. Claims and
// retries touch the list indexes not at all (both are LIVE).
//
// Three records live outside the partitions, each read and written alone
// (but by lua/createfast.lua):
// <prefix>id:<id> (the task's tenant, policy and partition, which TaskGet,
// TaskFinish and claims by ID look up and a Store caches, since they never
// change), <prefix>idem:<tenant>…<key> (the task an idempotency key names)
// and <prefix>seq (the creation counter behind list order and page
// tokens). TaskCreateBatch reserves the first two of all its tasks in one
// pipeline, then writes the tasks, one script per partition; see
// TaskCreateBatch for how a create cut short between the steps is
// completed.
//
// # Several instances
//
// Any number of Stores, in any number of processes, may share a prefix:
// claims are atomic, and the version fences a worker whose lease was taken
// over. Each instance claims from every partition, or from those
// WithClaimPartitions gives it. Listen tells an instance of tasks another
// one made due, through one Pub/Sub channel per partition
// (<prefix>wake:<N>).
//
// go-redis's own retries are off: a script must not run twice because its
// reply was lost. Callers retry failed calls with their policy.
//
// # Throughput
//
// A TaskClaim costs one script run per partition it takes tasks from, sent
// in one pipeline (a claim without IDs first reads the due sets, another
// round trip), and a TaskFinish one per partition of its items; a
// TaskCreateBatch costs two round trips whatever its size (reservations,
// then one script per partition; one when the server is not a cluster and
// its tasks are new and of one partition), and concurrent TaskCreate calls
// share them: a coalescer hands them to TaskCreateBatch together. Redis runs a
// shard's scripts one at a time, so its CPU is the ceiling: on a loaded
// 2-core VM, with the client on the same machine, claim+finish took some
// 32 µs of Redis CPU per task, a create on its own some 30 µs and one of a
// batch of 100 some 16 µs. BenchmarkClaimFinish measured 2,100–2,600
// tasks/s claimed and finished one at a time, 12,000–16,000 in batches of
// 64 and 16,000–21,000 in batches of 256; BenchmarkCreate (medians of five
// runs) 6,600–9,000 creates/s from one caller, 20,000 from 8 and 25,000
// from 16, and BenchmarkCreateBatch 37,000 tasks/s in batches of 100 from
// one caller and 51,000 from 8 (go test -run '^$' -bench . -benchtime 1s
// ./service/store/redis/; about half that while other processes kept both
// cores busy). Past one shard's ceiling, a Redis Cluster spreads the
// partitions over shards.
package redis
