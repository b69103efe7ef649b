package redis

import (
	"context"
	_ "embed"

	goredis "github.com/redis/go-redis/v9"
)

// The Lua scripts. Each names every key it touches in KEYS (none is built
// inside a script) and all of them share one hash tag, so each runs in one
// Redis Cluster slot. Their headers document KEYS, ARGV and the reply.
var (
	//go:embed lua/create.lua
	createLua string
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
)

// scripts are the store's scripts, with their SHA-1 digests computed once.
type scripts struct {
	create, claim, finish, transition, list, attempts, policy, release, due *goredis.Script
}

func newScripts() scripts {
	return scripts{
		create:     goredis.NewScript(createLua),
		claim:      goredis.NewScript(claimLua),
		finish:     goredis.NewScript(finishLua),
		transition: goredis.NewScript(transitionLua),
		list:       goredis.NewScript(listLua),
		attempts:   goredis.NewScript(attemptsLua),
		policy:     goredis.NewScript(policyLua),
		release:    goredis.NewScript(releaseLua),
		due:        goredis.NewScript(dueLua),
	}
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
	pipe := s.rdb.Pipeline()
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
