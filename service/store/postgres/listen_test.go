package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/postgres"
)

var t0 = time.Date(2031, 5, 6, 7, 8, 9, 123_000_000, time.UTC)

type heard struct {
	id      string
	due     time.Time
	version int64
}

// listener runs a store's Listen for a test.
type listener struct {
	notes     chan heard
	listening chan struct{}
	done      chan error
	cancel    context.CancelFunc
}

// startListen runs s.Listen until t ends and waits for its LISTEN.
func startListen(t *testing.T, s *postgres.Store) *listener {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &listener{notes: make(chan heard, 100), listening: make(chan struct{}, 10), done: make(chan error, 1), cancel: cancel}
	go func() {
		l.done <- s.Listen(ctx, func(d store.Due) { l.notes <- heard{d.ID, d.At, d.Version} },
			postgres.OnListening(func() { l.listening <- struct{}{} }))
	}()
	t.Cleanup(func() {
		cancel()
		<-l.done
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
	case err := <-l.done:
		t.Fatalf("Listen returned %v before listening", err)
	case <-time.After(waitFor):
		t.Fatalf("not listening after %v", waitFor)
	}
}

// expect fails t unless the next notification is for id, due at due.
func (l *listener) expect(t *testing.T, what, id string, due time.Time) {
	t.Helper()
	select {
	case h := <-l.notes:
		if h.id != id || !h.due.Equal(due) {
			t.Errorf("%s: heard %s due %v, want %s due %v", what, h.id, h.due, id, due)
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

// claimFinish claims task id at now and finishes it as status; a retry is
// due at next.
func claimFinish(t *testing.T, s store.Store, id string, now time.Time, status store.Status, next time.Time) {
	t.Helper()
	ctx := context.Background()
	c, err := s.TaskClaim(ctx, store.ClaimParams{Now: now, Lease: time.Minute, IDs: []string{id}})
	if err != nil || len(c) != 1 {
		t.Fatalf("TaskClaim(%s) = %d tasks, %v", id, len(c), err)
	}
	errs, err := s.TaskFinish(ctx, []store.Finish{{TaskID: id, Version: c[0].Version, Status: status, NextAttemptAt: next,
		Now: now, Attempt: store.Attempt{AttemptNumber: c[0].AttemptNumber, StartedAt: now, ResponseStatus: 503}}})
	if err != nil || errs[0] != nil {
		t.Fatalf("TaskFinish(%s) = %v, %v", id, errs, err)
	}
}

func TestListen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := newSchema(t)
	listening, writer := open(t, schema), open(t, schema)
	elsewhere := open(t, newSchema(t))
	l := startListen(t, listening)

	k1 := mustCreate(t, writer, newTask("k1", t0.Add(time.Hour)))
	l.expect(t, "create on another store", k1.ID, t0.Add(time.Hour))

	mustCreate(t, elsewhere, newTask("other-schema", t0))
	mustCreate(t, writer, newTask("k1", t0.Add(time.Hour))) // a repeat creates nothing
	k2 := mustCreate(t, writer, newTask("k2", t0))
	l.expect(t, "create after one in another schema and a repeat", k2.ID, t0)

	claimFinish(t, writer, k1.ID, t0.Add(time.Hour), store.Succeeded, time.Time{})
	k3 := mustCreate(t, listening, newTask("k3", t0.Add(2*time.Hour)))
	l.expect(t, "create on the listening store, after a success", k3.ID, t0.Add(2*time.Hour))

	claimFinish(t, writer, k2.ID, t0, store.Pending, t0.Add(5*time.Second))
	l.expect(t, "retry", k2.ID, t0.Add(5*time.Second))

	claimFinish(t, writer, k2.ID, t0.Add(5*time.Second), store.Exhausted, time.Time{})
	redriven := t0.Add(3 * time.Hour)
	if _, err := writer.TaskTransition(ctx, store.Transition{Tenant: "acme", TaskID: k2.ID,
		From: []store.Status{store.Exhausted}, To: store.Pending, Now: redriven}); err != nil {
		t.Fatal(err)
	}
	l.expect(t, "redrive", k2.ID, redriven)
}

func TestListenReconnects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := newSchema(t)
	s := open(t, schema, postgres.WithReconnect(backoff.Policy{Kind: backoff.Fixed, Base: 50 * time.Millisecond}))
	l := startListen(t, s)
	conn := admin(t)
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

func TestListenEnds(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	t.Run("context", func(t *testing.T) {
		s := open(t, schema)
		l := startListen(t, s)
		l.cancel()
		if err := <-l.done; !errors.Is(err, context.Canceled) {
			t.Errorf("Listen after its context ended = %v, want context.Canceled", err)
		}
		l.done <- nil // for the cleanup
	})
	t.Run("close", func(t *testing.T) {
		s := open(t, schema)
		l := startListen(t, s)
		s.Close()
		if err := <-l.done; !errors.Is(err, store.ErrClosed) {
			t.Errorf("Listen after Close = %v, want ErrClosed", err)
		}
		l.done <- nil
		if err := s.Listen(context.Background(), func(store.Due) {}); !errors.Is(err, store.ErrClosed) {
			t.Errorf("Listen on a closed store = %v, want ErrClosed", err)
		}
	})
}

func FuzzParseNote(f *testing.F) {
	f.Add(postgres.Note(store.Due{ID: store.NewID(), At: t0, Version: 3}))
	f.Add("x 1 2")
	f.Add("")
	f.Add("x 1")
	f.Add(" 12")
	f.Add("an id with spaces -9223372036854775808")
	f.Add("id 1e3")
	f.Fuzz(func(t *testing.T, payload string) {
		d, ok := postgres.ParseNote(payload)
		if !ok {
			return
		}
		if d.ID == "" {
			t.Fatalf("ParseNote(%q) accepted an empty ID", payload)
		}
		again, ok := postgres.ParseNote(postgres.Note(d))
		if !ok || again.ID != d.ID || !again.At.Equal(d.At) || again.Version != d.Version {
			t.Fatalf("ParseNote(Note(%v)) = %v, %v", d, again, ok)
		}
	})
}
