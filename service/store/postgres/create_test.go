package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/postgres/pgtest"
)

// TestCreateBatchNotes creates more tasks in one batch than one
// notification can announce: a Listen hears every one of them once, at
// version 1, from a handful of notifications each under PostgreSQL's limit,
// and a batch of repeats announces only the task it creates.
func TestCreateBatchNotes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := newSchema(t)
	writer := open(t, schema)
	l := startListen(t, open(t, schema))
	raw := pgtest.Admin(t)
	defer raw.Close(ctx)
	channel := pgx.Identifier{"retrykit." + schema}.Sanitize()
	if _, err := raw.Exec(ctx, "LISTEN "+channel); err != nil {
		t.Fatal(err)
	}

	in := make([]*store.Task, 1000)
	for i := range in {
		in[i] = newTask(fmt.Sprint("k", i), t0.Add(time.Duration(i)*time.Millisecond))
	}
	res, err := writer.TaskCreateBatch(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]time.Time{}
	for i, r := range res {
		if r.Err != nil || !r.Created {
			t.Fatalf("item %d = %+v, want created", i, r)
		}
		want[r.Task.ID] = in[i].NextAttemptAt
	}
	for range len(want) {
		h := l.next(t)
		due, ok := want[h.ID]
		if !ok || !h.At.Equal(due) || h.Version != 1 {
			t.Fatalf("heard %s due %v v%d: not a task of the batch, or heard twice (want due %v, v1)",
				h.ID, h.At, h.Version, due)
		}
		delete(want, h.ID)
	}

	fresh := newTask("fresh", t0)
	again, err := writer.TaskCreateBatch(ctx, append(in, fresh))
	if err != nil || again[len(in)].Err != nil || !again[len(in)].Created {
		t.Fatalf("batch of repeats and one new task = %v", err)
	}
	marker := mustCreate(t, writer, newTask("marker", t0))
	l.expect(t, "the one task the batch of repeats created", again[len(in)].Task.ID, t0)
	l.expect(t, "the next create", marker.ID, t0)

	// 1,001 notes of about 50 bytes each fit in 7 payloads of under 8,000.
	for n := 0; ; n++ {
		wctx, cancel := context.WithTimeout(ctx, waitFor)
		got, err := raw.WaitForNotification(wctx)
		cancel()
		if err != nil {
			t.Fatalf("after %d notifications: %v", n, err)
		}
		if len(got.Payload) >= 8000 {
			t.Errorf("a payload of %d bytes", len(got.Payload))
		}
		if strings.HasPrefix(got.Payload, marker.ID+" ") {
			if n > 8 {
				t.Errorf("%d notifications for two batches, want at most 8", n)
			}
			break
		}
	}
}

// next returns the next notification l hears.
func (l *listener) next(t *testing.T) store.Due {
	t.Helper()
	select {
	case d := <-l.heard:
		return d
	case <-time.After(waitFor):
		t.Fatalf("no notification within %v", waitFor)
		return store.Due{}
	}
}

// TestCreateBatchInOrder checks the cases where an item's outcome depends
// on what earlier items of its batch did: the batch answers as if its tasks
// were created one after another.
func TestCreateBatchInOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, newSchema(t))
	old := mustCreate(t, s, newTask("old", t0))
	with := func(key, id string) *store.Task {
		tk := newTask(key, t0)
		tk.ID = id
		return tk
	}
	in := []*store.Task{
		with("a", old.ID), with("a", ""), // the ID is taken, then the key is free
		with("old", old.ID),            // a repeat naming the task's own ID
		with("d", "y"), with("e", "y"), // the second finds its ID taken by the first
		with("old", "z"), with("g", "z"), // the first repeats a task, so its ID is free for the second
		with("h", "w"), with("h", "w"), // the second repeats the first
		with("i", old.ID), with("i", old.ID), with("i", ""), with("i", old.ID), // refused, refused, created, repeat
	}
	res, err := s.TaskCreateBatch(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		created bool
		id      string // of the task answered, "" for a new one
		err     error
	}
	wants := []want{{false, "", store.ErrConflict}, {true, "", nil}, {false, old.ID, nil},
		{true, "y", nil}, {false, "", store.ErrConflict}, {false, old.ID, nil}, {true, "z", nil},
		{true, "w", nil}, {false, "w", nil},
		{false, "", store.ErrConflict}, {false, "", store.ErrConflict}, {true, "", nil}, {false, "", nil}}
	for i, w := range wants {
		r := res[i]
		switch {
		case w.err != nil:
			if !errors.Is(r.Err, w.err) {
				t.Errorf("item %d (%s) = %+v, want %v", i, in[i].IdempotencyKey, r, w.err)
			}
		case r.Err != nil || r.Created != w.created || (w.id != "" && r.Task.ID != w.id):
			t.Errorf("item %d (%s) = %+v, want created %v, ID %q", i, in[i].IdempotencyKey, r, w.created, w.id)
		}
	}
	if res[12].Task == nil || res[12].Task.ID != res[11].Task.ID {
		t.Errorf("the last i repeats %v, want the task the item before created", res[12].Task)
	}
	// One task to insert, and its repeat, take the path of a lone create.
	res, err = s.TaskCreateBatch(ctx, []*store.Task{with("j", "v"), with("j", "v")})
	if err != nil || !res[0].Created || res[1].Err != nil || res[1].Created || res[1].Task.ID != "v" {
		t.Errorf("a task and its repeat = %+v, %v; want created, then a repeat of v", res, err)
	}
	counts, err := s.TaskCounts(ctx)
	if err != nil || counts[store.Pending] != 7 {
		t.Errorf("TaskCounts = %v, %v; want 7 PENDING", counts, err)
	}
}

// TestCreateBatchAllOrNothing makes a batch fail in its second statement,
// and another at its commit: neither writes anything, nor notifies.
func TestCreateBatchAllOrNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := newSchema(t)
	s := open(t, schema)
	l := startListen(t, s)
	conn := pgtest.Admin(t)
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE FUNCTION `+schema+`.boom() RETURNS trigger LANGUAGE plpgsql
		AS $$ BEGIN RAISE EXCEPTION 'boom'; END $$;
	CREATE TRIGGER boom BEFORE INSERT ON `+schema+`.retry_tasks
		FOR EACH ROW WHEN (NEW.idempotency_key = 'boom') EXECUTE FUNCTION `+schema+`.boom();
	CREATE CONSTRAINT TRIGGER late AFTER INSERT ON `+schema+`.retry_tasks DEFERRABLE INITIALLY DEFERRED
		FOR EACH ROW WHEN (NEW.idempotency_key = 'late') EXECUTE FUNCTION `+schema+`.boom()`); err != nil {
		t.Fatal(err)
	}
	first, boom := newTask("first", t0), newTask("boom", t0)
	first.ID, boom.ID = "shared", "shared" // so boom is inserted by a later statement
	for name, in := range map[string][]*store.Task{
		"in the second statement": {first, boom},
		"at the commit":           {newTask("before", t0), newTask("late", t0)},
	} {
		if res, err := s.TaskCreateBatch(ctx, in); err == nil || res != nil {
			t.Errorf("a batch failing %s = %v, %v; want an error", name, res, err)
		}
	}
	if _, _, err := s.TaskCreate(ctx, newTask("late", t0)); err == nil {
		t.Error("TaskCreate failing at the commit = nil error")
	}
	if counts, err := s.TaskCounts(ctx); err != nil || counts[store.Pending] != 0 {
		t.Errorf("TaskCounts = %v, %v; want nothing", counts, err)
	}
	if items, _, err := s.TaskList(ctx, store.TaskFilter{}, store.Page{}); err != nil || len(items) != 0 {
		t.Errorf("TaskList = %d tasks, %v; want none", len(items), err)
	}
	marker := mustCreate(t, s, newTask("marker", t0))
	l.expect(t, "the first create that commits", marker.ID, t0)
}

// TestCreateBatchRefusals refuses items one by one, and a closed store's
// whole batch.
func TestCreateBatchRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, newSchema(t))
	long := newTask("long", t0)
	long.ID = strings.Repeat("x", 8000)
	res, err := s.TaskCreateBatch(ctx, []*store.Task{long, newTask("a\x00", t0), newTask("ok", t0)})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res[:2] {
		if !errors.Is(r.Err, store.ErrInvalid) {
			t.Errorf("item %d = %+v, want ErrInvalid", i, r)
		}
	}
	if !res[2].Created {
		t.Errorf("item 2 = %+v, want created", res[2])
	}
	s.Close()
	if _, err := s.TaskCreateBatch(ctx, []*store.Task{newTask("after", t0)}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("TaskCreateBatch after Close = %v, want ErrClosed", err)
	}
}
