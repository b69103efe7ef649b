package feed_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/feed"
)

// conn is a fake connection: Serve hands its notes to wake, then fails
// with err, or waits for ctx when err is nil.
type conn struct {
	notes  []store.Due
	err    error
	closed atomic.Bool
}

// fake returns a Keep whose Connect hands out conns in turn, failing with
// errDown for each nil one, and the number of Connect calls.
func fake(conns ...*conn) (feed.Keep[*conn], *atomic.Int64) {
	var calls atomic.Int64
	return feed.Keep[*conn]{
		Name: "fake: listen",
		Connect: func(ctx context.Context) (*conn, error) {
			n := int(calls.Add(1)) - 1
			if n >= len(conns) {
				<-ctx.Done()
				return nil, ctx.Err()
			}
			if conns[n] == nil {
				return nil, errDown
			}
			return conns[n], nil
		},
		Serve: func(ctx context.Context, c *conn, wake func(store.Due)) error {
			for _, d := range c.notes {
				wake(d)
			}
			if c.err != nil {
				return c.err
			}
			<-ctx.Done()
			return ctx.Err()
		},
		Close:     func(c *conn) { c.closed.Store(true) },
		Reconnect: retry.Policy{Backoff: backoff.Policy{Kind: backoff.Fixed, Base: time.Millisecond}},
		Log:       slog.New(slog.DiscardHandler),
		Lost:      "lost",
	}, &calls
}

var errDown = errors.New("down")

// A dropped connection is closed and made again, after failed attempts,
// and onListening is called each time one is in place.
func TestKeepReconnects(t *testing.T) {
	first := &conn{notes: []store.Due{{ID: "a"}}, err: errors.New("dropped")}
	second := &conn{notes: []store.Due{{ID: "b"}}}
	k, _ := fake(first, nil, nil, second)
	ctx, cancel := context.WithCancel(context.Background())
	var heard []string
	listening := 0
	done := make(chan error, 1)
	go func() {
		done <- k.Run(ctx, context.Background(), func(d store.Due) {
			heard = append(heard, d.ID)
			if d.ID == "b" {
				cancel()
			}
		}, func() { listening++ })
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run after its context ended = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not end with its context")
	}
	if len(heard) != 2 || heard[0] != "a" || heard[1] != "b" || listening != 2 {
		t.Errorf("heard %v, onListening called %d times; want [a b], 2", heard, listening)
	}
	if !first.closed.Load() || !second.closed.Load() {
		t.Errorf("connections closed: %v %v, want both", first.closed.Load(), second.closed.Load())
	}
}

// A store closed before, during or between connections ends Run with
// ErrClosed, and a nil onListening is allowed.
func TestKeepEndsWhenClosed(t *testing.T) {
	closed, stop := context.WithCancel(context.Background())
	stop()
	k, calls := fake(&conn{})
	if err := k.Run(context.Background(), closed, func(store.Due) {}, nil); !errors.Is(err, store.ErrClosed) || calls.Load() != 0 {
		t.Errorf("Run on a closed store = %v after %d connections, want ErrClosed at once", err, calls.Load())
	}

	for _, c := range []*conn{{}, {err: errDown}} {
		life, stop := context.WithCancel(context.Background())
		k, _ := fake(c)
		done := make(chan error, 1)
		go func() { done <- k.Run(context.Background(), life, func(store.Due) {}, stop) }()
		select {
		case err := <-done:
			if !errors.Is(err, store.ErrClosed) {
				t.Errorf("Run after the store closed = %v, want ErrClosed", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not end when the store closed")
		}
	}
}

// An ErrClosed from Connect is final.
func TestKeepConnectClosed(t *testing.T) {
	k, calls := fake()
	k.Connect = func(context.Context) (*conn, error) {
		calls.Add(1)
		return nil, store.ErrClosed
	}
	if err := k.Run(context.Background(), context.Background(), func(store.Due) {}, nil); !errors.Is(err, store.ErrClosed) || calls.Load() != 1 {
		t.Errorf("Run = %v after %d attempts, want ErrClosed after 1", err, calls.Load())
	}
}
