package redis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/service/store"
)

// listenPing is how long Listen waits for a message before it pings the
// server, and then for the answer before it gives the connection up: a
// server that vanished without closing the connection is noticed.
const listenPing = 15 * time.Second

// ListenOption changes what Listen does.
type ListenOption func(*listenConfig)

type listenConfig struct {
	onListening func()
}

// OnListening has Listen call f each time its subscription is in place:
// once subscribed, and again after each resubscription. Wake-ups sent
// while no subscription was in place are lost, so a caller that must not
// miss one rescans the store when f is called again (the scheduler's
// resync does). f runs on Listen's goroutine; it should return quickly.
func OnListening(f func()) ListenOption { return func(c *listenConfig) { c.onListening = f } }

// Listen calls fn for every task that becomes PENDING in the partitions
// this Store claims from, whichever instance made the change: a create, a
// redrive, or a retry (a TaskFinish to PENDING), with when the task's next
// attempt is due and its version after the change. A scheduler passes its Wake method:
//
//	go func() { _ = s.Listen(ctx, scheduler.Wake) }()
//
// Wake-ups are hints, at most once each: a claim may still find the task
// taken or not due. fn is called from Listen's goroutine, one call at a
// time, in the order Redis delivered the changes; it should not block.
// Pub/Sub delivers messages only while subscribed: wake-ups sent while the
// subscription is down (the server restarting, say) are lost (see
// OnListening), so polling the store remains the fallback.
//
// Listen subscribes, then keeps the subscription: when it is lost, Listen
// logs it and subscribes again, waiting between attempts as
// WithListenBackoff says (through retry.Do), for as long as it takes. It
// returns ctx's error once ctx is done, and an error wrapping
// store.ErrClosed once the Store is closed. Any number of Listens may run
// at once, each with a connection of its own.
func (s *Store) Listen(ctx context.Context, fn func(store.Due), opts ...ListenOption) error {
	var cfg listenConfig
	for _, o := range opts {
		o(&cfg)
	}
	if err := s.open("listen"); err != nil {
		return err
	}
	channels := make([]string, len(s.claim))
	for i, p := range s.claim {
		channels[i] = s.k.wake(p)
	}
	policy := retry.Policy{
		Backoff: s.listen, MaxAttempts: math.MaxInt32, Name: "redis.listen", Logger: s.log,
		Classifier: retry.ClassifierFunc(func(err error) retry.Decision {
			if errors.Is(err, store.ErrClosed) {
				return retry.NoRetry
			}
			return retry.Retry
		}),
	}
	for {
		ps, err := retry.DoValue(ctx, policy, func(ctx context.Context) (*goredis.PubSub, error) {
			return s.subscribe(ctx, channels)
		})
		if ctx.Err() != nil {
			if ps != nil {
				ps.Close()
			}
			return ctx.Err()
		}
		if err != nil {
			return fmt.Errorf("redis: listen: %w", err)
		}
		if cfg.onListening != nil {
			cfg.onListening()
		}
		err = receive(ctx, ps, fn)
		ps.Close()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case s.closed.Load():
			return fmt.Errorf("redis: listen: %w", store.ErrClosed)
		}
		s.log.Warn("redis: lost the wake-up subscription; subscribing again", "error", err)
	}
}

// subscribe subscribes to channels and waits for Redis to confirm it.
func (s *Store) subscribe(ctx context.Context, channels []string) (*goredis.PubSub, error) {
	if err := s.open("subscribe"); err != nil {
		return nil, err
	}
	ps := s.rdb.Subscribe(ctx)
	err := ps.Subscribe(ctx, channels...)
	if err == nil {
		// The first confirmation comes once Redis has subscribed to all.
		_, err = ps.ReceiveTimeout(ctx, listenPing)
	}
	if err != nil {
		ps.Close()
		return nil, s.fail("subscribe", err)
	}
	return ps, nil
}

// receive hands the wake-ups ps receives to fn until the connection fails
// or ctx is done.
func receive(ctx context.Context, ps *goredis.PubSub, fn func(store.Due)) error {
	// A read does not end with its context: closing ps ends it.
	stop := context.AfterFunc(ctx, func() { ps.Close() })
	defer stop()
	pinged := false
	for {
		msg, err := ps.ReceiveTimeout(ctx, listenPing)
		var nerr net.Error
		switch {
		case err == nil:
			pinged = false
		case errors.As(err, &nerr) && nerr.Timeout() && !pinged:
			if err := ps.Ping(ctx); err != nil {
				return err
			}
			pinged = true
			continue
		default:
			return err
		}
		if m, ok := msg.(*goredis.Message); ok {
			for _, d := range parseWakes(m.Payload) {
				fn(d)
			}
		}
	}
}
