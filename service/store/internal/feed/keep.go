package feed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/service/store"
)

// Keep keeps a feed on connections of type C, one at a time: what a
// store's Listen is, but for how the store connects and reads.
type Keep[C any] struct {
	Name string // names the feed in errors: "postgres: listen"
	// Connect makes one attempt at a connection on which the feed is in
	// place (listening, subscribed); Keep retries it with Reconnect.
	Connect func(ctx context.Context) (C, error)
	// Serve hands the notes c receives to wake until c fails or ctx ends.
	Serve func(ctx context.Context, c C, wake func(store.Due)) error
	// Close releases c once Serve has returned.
	Close func(c C)
	// Reconnect paces the attempts to connect. Keep sets MaxAttempts (no
	// limit: until ctx ends) and the Classifier (every error but
	// store.ErrClosed is retried).
	Reconnect retry.Policy
	Log       *slog.Logger
	Lost      string // logged at Warn, with the error, each time a connection drops
}

// Run keeps the feed until ctx ends or life does (a store's Close cancels
// it), as store.Feed's Listen says: it calls onListening, when not nil,
// each time a connection is in place, and returns an error wrapping ctx's,
// or store.ErrClosed once life has ended.
func (k Keep[C]) Run(ctx, life context.Context, wake func(store.Due), onListening func()) error {
	if life.Err() != nil {
		return fmt.Errorf("%s: %w", k.Name, store.ErrClosed)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(life, func() { cancel(store.ErrClosed) })
	defer stop()
	policy := k.Reconnect
	policy.MaxAttempts = math.MaxInt32
	policy.Classifier = retry.ClassifierFunc(func(err error) retry.Decision {
		if errors.Is(err, store.ErrClosed) {
			return retry.NoRetry
		}
		return retry.Retry
	})
	for {
		c, err := retry.DoValue(ctx, policy, k.Connect)
		if err != nil {
			return k.end(ctx, life, err)
		}
		if onListening != nil {
			onListening()
		}
		err = k.Serve(ctx, c, wake)
		k.Close(c)
		if ctx.Err() != nil || life.Err() != nil || errors.Is(err, store.ErrClosed) {
			return k.end(ctx, life, err)
		}
		k.Log.LogAttrs(ctx, slog.LevelWarn, k.Lost, slog.Any("error", err))
	}
}

// end is what Run returns once ctx or life has ended or err was final.
// life is looked at first: the store closing may be what made the
// connection fail, before its AfterFunc has cancelled ctx.
func (k Keep[C]) end(ctx, life context.Context, err error) error {
	switch {
	case life.Err() != nil:
		err = store.ErrClosed
	case context.Cause(ctx) != nil:
		err = context.Cause(ctx)
	}
	return fmt.Errorf("%s: %w", k.Name, err)
}
