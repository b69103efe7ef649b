package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/postgres"
	"github.com/retrykit/retry/service/store/postgres/pgtest"
)

// What every store.Feed does is checked by storetest; here is what is
// PostgreSQL's own: schemas that do not hear each other, and reconnection.

var t0 = time.Date(2031, 5, 6, 7, 8, 9, 123_000_000, time.UTC)

// listener runs a store's Listen for a test.
type listener struct {
	heard     chan store.Due
	listening chan struct{}
}

// startListen runs s.Listen until t ends and waits for its LISTEN.
func startListen(t *testing.T, s *postgres.Store) *listener {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &listener{heard: make(chan store.Due, 100), listening: make(chan struct{}, 10)}
	done := make(chan error, 1)
	go func() {
		done <- s.Listen(ctx, func(d store.Due) { l.heard <- d }, func() { l.listening <- struct{}{} })
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	l.waitListening(t)
	return l
}

// waitFor bounds every wait, so that a missing notification fails the test
// rather than hanging it; it is not a measure of speed.
const waitFor = 20 * time.Second

func (l *listener) waitListening(t *testing.T) {
	t.Helper()
	select {
	case <-l.listening:
	case <-time.After(waitFor):
		t.Fatalf("not listening after %v", waitFor)
	}
}

// expect fails t unless the next notification is for id, due at due.
func (l *listener) expect(t *testing.T, what, id string, due time.Time) {
	t.Helper()
	select {
	case d := <-l.heard:
		if d.ID != id || !d.At.Equal(due) {
			t.Errorf("%s: heard %s due %v, want %s due %v", what, d.ID, d.At, id, due)
		}
	case <-time.After(waitFor):
		t.Fatalf("%s: no notification for %s within %v", what, id, waitFor)
	}
}

func newTask(key string, due time.Time) *store.Task {
	return &store.Task{Tenant: "acme", IdempotencyKey: key, RequestHash: key, TargetURL: "http://127.0.0.1:9/",
		Method: "POST", CreatedAt: t0, NextAttemptAt: due}
}

func mustCreate(t *testing.T, s store.Store, in *store.Task) *store.Task {
	t.Helper()
	got, _, err := s.TaskCreate(context.Background(), in)
	if err != nil {
		t.Fatalf("TaskCreate(%s) = %v", in.IdempotencyKey, err)
	}
	return got
}

// NOTIFY channels are the database's: a store hears nothing of the
// changes in another schema.
func TestListenOwnSchema(t *testing.T) {
	t.Parallel()
	l := startListen(t, open(t, newSchema(t)))
	elsewhere := open(t, newSchema(t))
	mustCreate(t, elsewhere, newTask("other-schema", t0))
	select {
	case d := <-l.heard:
		t.Errorf("heard %s, created in another schema", d.ID)
	case <-time.After(200 * time.Millisecond):
	}
}

func TestListenReconnects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := newSchema(t)
	s := open(t, schema, postgres.WithReconnect(backoff.Policy{Kind: backoff.Fixed, Base: 50 * time.Millisecond}))
	l := startListen(t, s)
	conn := pgtest.Admin(t)
	defer conn.Close(ctx)
	var killed int
	if err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = 'retrykit-listen' AND query = $1`, `LISTEN "retrykit.`+schema+`"`).Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("terminated %d listening backends, %v; want 1", killed, err)
	}
	l.waitListening(t)
	k := mustCreate(t, s, newTask("k", t0))
	l.expect(t, "create after the reconnection", k.ID, t0)
}
