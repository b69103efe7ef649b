package redis

import (
	"context"
	"errors"
	"net"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/feed"
)

// listenPing is how long Listen waits for a message before it pings the
// server, and then for the answer before it gives the connection up: a
// server that vanished without closing the connection is noticed.
const listenPing = 15 * time.Second

// Listen is the store's change feed; see store.Feed. The scripts that
// make a task due sooner (a create, a redrive, a TaskFinish to PENDING)
// publish its note (see package feed) on the wake-up channel of its
// partition, and Listen subscribes to the channels of the partitions this
// Store claims from (WithClaimPartitions): it hears of the tasks of those
// only. A scheduler passes its Wake method and its resync:
//
//	go func() { _ = s.Listen(ctx, scheduler.Wake, onListening) }()
//
// Pub/Sub delivers messages only while subscribed: wake-ups sent while the
// subscription is down (the server restarting, say) are lost, so polling
// the store remains the fallback. When the subscription is lost, Listen
// logs it and subscribes again, waiting between attempts as
// WithListenBackoff says (through retry.Do), for as long as it takes. Each
// Listen has a connection of its own.
func (s *Store) Listen(ctx context.Context, wake func(store.Due), onListening func()) error {
	channels := make([]string, len(s.claim))
	for i, p := range s.claim {
		channels[i] = s.k.wake(p)
	}
	return feed.Keep[*goredis.PubSub]{
		Name:      "redis: listen",
		Connect:   func(ctx context.Context) (*goredis.PubSub, error) { return s.subscribe(ctx, channels) },
		Serve:     receive,
		Close:     func(ps *goredis.PubSub) { ps.Close() },
		Reconnect: retry.Policy{Backoff: s.listen, Name: "redis.listen", Logger: s.log},
		Log:       s.log,
		Lost:      "redis: lost the wake-up subscription; subscribing again",
	}.Run(ctx, s.life, wake, onListening)
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

// receive hands the wake-ups ps receives to wake until the connection
// fails or ctx is done.
func receive(ctx context.Context, ps *goredis.PubSub, wake func(store.Due)) error {
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
			feed.ParseMessage(m.Payload, wake)
		}
	}
}

var _ store.Feed = (*Store)(nil)
