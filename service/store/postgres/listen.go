package postgres

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/feed"
)

// Listen is the store's change feed; see store.Feed. Every Store on the
// same database and schema, this one included, sends a NOTIFY in the
// transaction of each change that makes a task due sooner, a note per
// task (see package feed), so it is reported once that change has
// committed. A scheduler passes its Wake method and its resync:
//
//	go st.Listen(ctx, sched.Wake, onListening)
//
// Listen holds one connection of its own, outside the pool. When it drops,
// Listen reconnects with the store's reconnect backoff (WithReconnect),
// through retry.Do, for as long as it takes.
func (s *Store) Listen(ctx context.Context, wake func(store.Due), onListening func()) error {
	return feed.Keep[*pgx.Conn]{
		Name:      "postgres: listen",
		Connect:   s.listenConn,
		Serve:     s.serve,
		Close:     func(c *pgx.Conn) { _ = c.Close(context.Background()) },
		Reconnect: s.reconnect,
		Log:       s.log,
		Lost:      "postgres: listen connection lost; reconnecting",
	}.Run(ctx, s.life, wake, onListening)
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

// serve calls wake for each note of the notifications on conn until conn
// fails or ctx ends. Payloads that are not notes (someone else's NOTIFY on
// the channel) are skipped.
func (s *Store) serve(ctx context.Context, conn *pgx.Conn, wake func(store.Due)) error {
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if feed.ParseMessage(n.Payload, wake) > 0 {
			s.log.LogAttrs(ctx, slog.LevelDebug, "postgres: skipped a foreign notification",
				slog.String("channel", n.Channel), slog.String("payload", n.Payload))
		}
	}
}

var _ store.Feed = (*Store)(nil)
