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

// note is the payload of the notification that a task is due: the ID, the
// due time in epoch milliseconds and the task's version, separated by
// spaces. Several notes may share a notification, a line each.
func note(d store.Due) string {
	return d.ID + " " + strconv.FormatInt(d.At.UnixMilli(), 10) + " " + strconv.FormatInt(d.Version, 10)
}

// parseNote reads one note; ok is false for anything else. The time and
// the version are after the last two spaces, so an ID may hold spaces. A
// note without a version (from an older retryd) has version 0, unknown.
func parseNote(payload string) (d store.Due, ok bool) {
	rest, last, ok := cutLast(payload)
	if !ok {
		return store.Due{}, false
	}
	if id, at, ok := cutLast(rest); ok && id != "" {
		if v, err := strconv.ParseInt(last, 10, 64); err == nil {
			if ms, err := strconv.ParseInt(at, 10, 64); err == nil {
				return store.Due{ID: id, At: time.UnixMilli(ms).UTC(), Version: v}, true
			}
		}
	}
	ms, err := strconv.ParseInt(last, 10, 64)
	if err != nil || rest == "" {
		return store.Due{}, false
	}
	return store.Due{ID: rest, At: time.UnixMilli(ms).UTC()}, true
}

// cutLast splits s at its last space.
func cutLast(s string) (before, after string, ok bool) {
	i := strings.LastIndexByte(s, ' ')
	if i < 0 {
		return "", "", false
	}
	return s[:i], s[i+1:], true
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
// on the same database and schema, this one included: fn is called for
// each task created, redriven, or finished with a retry, once that change
// has committed, with the task's NextAttemptAt (at millisecond precision)
// and its version after the change. fn runs on Listen's goroutine, one call at a time,
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
func (s *Store) Listen(ctx context.Context, fn func(store.Due), opts ...ListenOption) error {
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
func (s *Store) serve(ctx context.Context, conn *pgx.Conn, fn func(store.Due)) error {
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		for line := range strings.Lines(n.Payload) {
			if d, ok := parseNote(strings.TrimSuffix(line, "\n")); ok {
				fn(d)
			} else {
				s.log.LogAttrs(ctx, slog.LevelDebug, "postgres: skipped a foreign notification",
					slog.String("channel", n.Channel), slog.String("payload", n.Payload))
			}
		}
	}
}
