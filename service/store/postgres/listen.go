package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/service/store"
)

// note is the payload of the notification that task id is due at due:
// the ID, a space, and the due time in epoch milliseconds.
func note(id string, due time.Time) string {
	return id + " " + strconv.FormatInt(due.UnixMilli(), 10)
}

// parseNote reads a payload note made; ok is false for anything else. The
// time is after the last space, so an ID may hold spaces.
func parseNote(payload string) (id string, due time.Time, ok bool) {
	sp := strings.LastIndexByte(payload, ' ')
	if sp < 1 {
		return "", time.Time{}, false
	}
	n, err := strconv.ParseInt(payload[sp+1:], 10, 64)
	if err != nil {
		return "", time.Time{}, false
	}
	return payload[:sp], time.UnixMilli(n).UTC(), true
}

// ListenOption changes what Listen does.
type ListenOption func(*listenConfig)

type listenConfig struct {
	onListening func()
}

// OnListening has Listen call f each time its LISTEN is in place: once
// connected, and again after each reconnection. Tasks made due while no
// LISTEN was in place are not reported, so a caller that must not miss one
// rescans the store when f is called again (the scheduler's resync does).
// f runs on Listen's goroutine; it should return quickly.
func OnListening(f func()) ListenOption { return func(c *listenConfig) { c.onListening = f } }

// Listen reports tasks that became due, or due sooner, through any Store
// on the same database and schema, this one included: fn(taskID, due) is
// called for each task created, redriven, or finished with a retry, once
// that change has committed. due is the task's NextAttemptAt, at
// millisecond precision. fn runs on Listen's goroutine, one call at a time,
// and must not block for long: notifications queue in the server meanwhile.
// A scheduler passes its Wake method:
//
//	go st.Listen(ctx, sched.Wake)
//
// Reports are hints, at most once each: a task's claim may still fail (it
// was claimed by another instance, or is not due yet), and a report sent
// while Listen was reconnecting is lost (see OnListening). Polling the
// store remains the fallback.
//
// Listen holds one connection of its own, outside the pool. When it drops,
// Listen reconnects with the store's reconnect backoff (WithReconnect),
// through retry.Do, for as long as it takes. It returns ctx's error when
// ctx ends and store.ErrClosed when the store is closed; any number of
// Listens may run at once.
func (s *Store) Listen(ctx context.Context, fn func(taskID string, due time.Time), opts ...ListenOption) error {
	var cfg listenConfig
	for _, o := range opts {
		o(&cfg)
	}
	if s.closed.Load() {
		return store.ErrClosed
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(s.life, func() { cancel(store.ErrClosed) })
	defer stop()
	for {
		conn, err := retry.DoValue(ctx, s.reconnect, s.listenConn)
		if err != nil {
			return s.listenEnd(ctx, err)
		}
		if cfg.onListening != nil {
			cfg.onListening()
		}
		err = s.serve(ctx, conn, fn)
		_ = conn.Close(context.WithoutCancel(ctx))
		if ctx.Err() != nil {
			return s.listenEnd(ctx, err)
		}
		s.log.LogAttrs(ctx, slog.LevelWarn, "postgres: listen connection lost; reconnecting", slog.Any("error", err))
	}
}

// listenEnd is what Listen returns once ctx has ended or err was final.
func (s *Store) listenEnd(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil {
		if errors.Is(cause, store.ErrClosed) {
			return fmt.Errorf("postgres: listen: %w", store.ErrClosed)
		}
		return fmt.Errorf("postgres: listen: %w", cause)
	}
	return fmt.Errorf("postgres: listen: %w", err)
}

// listenConn opens a connection and LISTENs on the store's channel.
func (s *Store) listenConn(ctx context.Context) (*pgx.Conn, error) {
	cfg := s.connCfg.Copy()
	cfg.RuntimeParams["application_name"] = "retrykit-listen"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return conn, nil
}

// serve calls fn for each notification on conn until conn fails or ctx
// ends. Payloads that are not notes (someone else's NOTIFY on the channel)
// are skipped.
func (s *Store) serve(ctx context.Context, conn *pgx.Conn, fn func(string, time.Time)) error {
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if id, due, ok := parseNote(n.Payload); ok {
			fn(id, due)
		} else {
			s.log.LogAttrs(ctx, slog.LevelDebug, "postgres: skipped a foreign notification",
				slog.String("channel", n.Channel), slog.String("payload", n.Payload))
		}
	}
}
