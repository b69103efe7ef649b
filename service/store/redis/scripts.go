package redis

import (
	"context"
	_ "embed"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// The Lua scripts. Each names every key it touches in KEYS (none is built
// inside a script) and all of them share one hash tag, so each runs in one
// Redis Cluster slot. Their headers document KEYS, ARGV and the reply.
var (
	//go:embed lua/create.lua
	createLua string
	//go:embed lua/createfast.lua
	createFastLua string
	//go:embed lua/claim.lua
	claimLua string
	//go:embed lua/finish.lua
	finishLua string
	//go:embed lua/transition.lua
	transitionLua string
	//go:embed lua/list.lua
	listLua string
	//go:embed lua/attempts.lua
	attemptsLua string
	//go:embed lua/policy.lua
	policyLua string
	//go:embed lua/release.lua
	releaseLua string
	//go:embed lua/due.lua
	dueLua string
	//go:embed lua/purge.lua
	purgeLua string
	//go:embed lua/tcountsfill.lua
	tcountsFillLua string
	//go:embed lua/instance.lua
	instanceLua string
	//go:embed lua/bury.lua
	buryLua string
	//go:embed lua/leases.lua
	leasesLua string
	//go:embed lua/counts.lua
	countsLua string
	//go:embed lua/gather.lua
	gatherLua string
	//go:embed lua/newtask.lua
	newTaskLua string
	//go:embed lua/destcreate.lua
	destCreateLua string
	//go:embed lua/destupdate.lua
	destUpdateLua string
	//go:embed lua/destdelete.lua
	destDeleteLua string
	//go:embed lua/limit.lua
	limitLua string
	//go:embed lua/reseal.lua
	resealLua string
)

// scripts are the store's scripts, with their SHA-1 digests computed once.
type scripts struct {
	create, claim, finish, transition, list, attempts, policy, release, due, purge, tcountsFill *goredis.Script
	createFast, instance, bury, leases                                                          *goredis.Script
	destCreate, destUpdate, destDelete, limit, reseal                                           *goredis.Script
}

func newScripts() scripts {
	return scripts{
		create:      goredis.NewScript(withPrelude(createLua, newTaskLua)),
		createFast:  goredis.NewScript(withPrelude(createFastLua, newTaskLua)),
		claim:       goredis.NewScript(withPrelude(claimLua)),
		finish:      goredis.NewScript(withPrelude(finishLua)),
		transition:  goredis.NewScript(withPrelude(transitionLua)),
		list:        goredis.NewScript(listLua),
		attempts:    goredis.NewScript(attemptsLua),
		policy:      goredis.NewScript(policyLua),
		release:     goredis.NewScript(releaseLua),
		due:         goredis.NewScript(dueLua),
		purge:       goredis.NewScript(withPrelude(purgeLua)),
		tcountsFill: goredis.NewScript(tcountsFillLua),
		instance:    goredis.NewScript(instanceLua),
		bury:        goredis.NewScript(buryLua),
		leases:      goredis.NewScript(withPrelude(leasesLua)),
		destCreate:  goredis.NewScript(destCreateLua),
		destUpdate:  goredis.NewScript(destUpdateLua),
		destDelete:  goredis.NewScript(destDeleteLua),
		limit:       goredis.NewScript(limitLua),
		reseal:      goredis.NewScript(resealLua),
	}
}

// withPrelude puts the task counts' rule (lua/counts.lua), the gathered
// writes (lua/gather.lua) and then more, such as lua/newtask.lua, into
// script, after its first line (its #! line, where Redis wants it).
func withPrelude(script string, more ...string) string {
	first, rest, _ := strings.Cut(script, "\n")
	return first + "\n" + countsLua + gatherLua + strings.Join(more, "") + rest
}

// call is one script run: Store.eval fills in cmd.
type call struct {
	sc   *goredis.Script
	keys []string
	args []any
	cmd  *goredis.Cmd
}

// eval runs calls in one pipeline (on a cluster, one per node). A server
// that lost its script cache (a restart) answers NOSCRIPT without running
// anything, so those calls run again on their own, sending the script.
// Each call's outcome is in its cmd.
func (s *Store) eval(ctx context.Context, calls ...*call) {
	if len(calls) == 1 {
		c := calls[0]
		c.cmd = c.sc.Run(ctx, s.rdb, c.keys, c.args...)
		return
	}
	s.evalWith(ctx, s.rdb.Pipeline(), calls...)
}

// evalWith is eval with commands already queued in pipe, which run in the
// same round trip, before the calls (on one node; a cluster's nodes run
// their parts in parallel). Their outcomes are in their own Cmds.
func (s *Store) evalWith(ctx context.Context, pipe goredis.Pipeliner, calls ...*call) {
	for _, c := range calls {
		c.cmd = c.sc.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx) // each cmd holds its own error
	for _, c := range calls {
		if goredis.HasErrorPrefix(c.cmd.Err(), "NOSCRIPT") {
			c.cmd = c.sc.Run(ctx, s.rdb, c.keys, c.args...)
		}
	}
}

// keyList gathers the KEYS of a script call whose arguments name keys by
// position, each key once.
type keyList struct {
	keys []string
	pos  map[string]int    // key → position
	runs map[[3]string]int // three list indexes → position of the first
}

// key returns the position (from 1, as in Lua) of k in the list.
func (b *keyList) key(k string) int {
	if n, ok := b.pos[k]; ok {
		return n
	}
	if b.pos == nil {
		b.pos = map[string]int{}
	}
	b.keys = append(b.keys, k)
	b.pos[k] = len(b.keys)
	return len(b.keys)
}

// indexes returns the position of the first of three index keys, which
// scripts read as a run: a run already there is reused, else all three
// are appended (a key may then be in the list twice, which is harmless).
func (b *keyList) indexes(ix [3]string) int {
	if n, ok := b.runs[ix]; ok {
		return n
	}
	if b.runs == nil {
		b.runs = map[[3]string]int{}
	}
	b.keys = append(b.keys, ix[:]...)
	b.runs[ix] = len(b.keys) - 2
	return len(b.keys) - 2
}
