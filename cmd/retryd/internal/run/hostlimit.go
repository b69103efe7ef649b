package run

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/service/hostlimit"
	"github.com/retrykit/retry/service/store"
)

// HostLimitConfig is what the --host-limiter flags say: whether every
// attempt passes its target host's adaptive limiter (package hostlimit),
// and the settings of the limiters of the policies that have none of their
// own.
type HostLimitConfig struct {
	HostLimiter       bool
	HostLimiterConfig retry.LimiterConfig
}

// hostLimitFlags defines --host-limiter and --host-limiter-config.
func hostLimitFlags(fs *flag.FlagSet, c *HostLimitConfig) {
	fs.Var(onOff{&c.HostLimiter}, "host-limiter",
		"`on|off`: on, every attempt passes its target host's adaptive limiter, which holds tasks back (PENDING, uncharged) "+
			"while the host answers 429 or Retry-After, or is out (most answers 503, refused connections, timeouts); "+
			"off (the default), only the tasks of policies whose hostLimiter turns it on do")
	fs.Func("host-limiter-config",
		"the host limiters' settings as `JSON` (a policy's hostLimiter fields: floor, ceiling, increase, decrease, burst, "+
			"queueMs, circuitAfterMs, openForMs; on a shared store, increase is the whole fleet's, each instance taking its part); "+
			"a policy's own hostLimiter overrides them for its tasks",
		func(s string) error {
			var lc retry.LimiterConfig
			if err := json.Unmarshal([]byte(s), &lc); err != nil {
				return err
			}
			c.HostLimiterConfig = lc
			return nil
		})
}

// hostLimits returns the scheduler's host limits: every policy's unless
// --host-limiter is off, when only the policies that turn them on have
// them.
func (c *HostLimitConfig) hostLimits() (*hostlimit.Limits, error) {
	ls, err := hostlimit.New(c.HostLimiterConfig, 0, nil)
	if err != nil {
		return nil, fmt.Errorf("--host-limiter-config: %w", err)
	}
	ls.SetOptIn(!c.HostLimiter)
	return ls, nil
}

// onOff is a boolean flag spelled on or off (true and false too).
type onOff struct{ b *bool }

func (v onOff) String() string {
	if v.b != nil && *v.b {
		return "on"
	}
	return "off"
}

func (v onOff) Set(s string) error {
	switch s {
	case "on", "true":
		*v.b = true
	case "off", "false":
		*v.b = false
	default:
		return fmt.Errorf("%q is neither on nor off", s)
	}
	return nil
}

// shareEvery is how often an instance of a shared store counts the
// instances alive, to take its part of its host limiters' increase.
const shareEvery = 2 * time.Second

// shareHostLimits keeps hosts' share (hostlimit.Limits.SetShare) at the
// number of instances alive on the store, until ctx ends: the instances'
// limiters adapt each on its own, from the target's own answers, and their
// increases would add up; each taking its part keeps their sum at the
// configured increase, so that a fleet overshoots a target no more than
// one instance would. A failed count keeps the last share.
func shareHostLimits(ctx context.Context, fleet store.Fleet, hosts *hostlimit.Limits, log *slog.Logger) {
	last := 1
	every(ctx, 0, shareEvery, func(ctx context.Context) {
		n, err := fleet.InstancesAlive(ctx, time.Now(), deadAfter)
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("could not count the instances sharing the store; the host limiters keep their share", "error", err)
			}
			return
		}
		n = max(n, 1)
		hosts.SetShare(n)
		if n != last {
			log.Info("host limiters: each instance takes its part of the increase", "instances", n)
			last = n
		}
	})
}
