package redis_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/redis"
	"github.com/retrykit/retry/service/store/redis/redistest"
)

// spread returns n new tasks of tenant acme, task i with the policy
// policies[i%len(policies)], idempotency key k<i> and due at t0+i ms.
func spread(n int, policies []string) []*store.Task {
	out := make([]*store.Task, n)
	for i := range out {
		out[i] = &store.Task{Tenant: "acme", PolicyID: policies[i%len(policies)], IdempotencyKey: fmt.Sprint("k", i),
			RequestHash: fmt.Sprint("h", i), TargetURL: "http://127.0.0.1:9/", Method: "POST",
			CreatedAt: t0, NextAttemptAt: t0.Add(time.Duration(i) * time.Millisecond)}
	}
	return out
}

// policiesIn returns policies of tenant acme in partitions 0 to n-1.
func policiesIn(s *redis.Store, n int) []string {
	out := make([]string, n)
	for p := range out {
		out[p] = policyIn(s, "acme", p)
	}
	return out
}

// A batch of a thousand tasks over several partitions is heard of in full
// by Listen, every task once at version 1, in one message per partition.
func TestCreateBatchWakes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := redistest.URL(t)
	s := closeAtEnd(t, open(t, url, redistest.Prefix(t, url), redis.WithPartitions(8)))
	wakes, _, _ := listen(t, s)
	raw := redistest.Client(t, url)
	defer raw.Close()
	channels := make([]string, s.Partitions())
	for p := range channels {
		channels[p] = redis.WakeChannel(s, p)
	}
	sub := raw.Subscribe(ctx, channels...)
	defer sub.Close()
	for _, c := range channels {
		waitSubscribed(t, url, c, 2)
	}

	policies := policiesIn(s, 4)
	in := spread(1000, policies)
	res, err := s.TaskCreateBatch(ctx, in)
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
	// Pub/Sub delivers a connection's messages in the order they were
	// published: once a later task is heard of, all of the batch was.
	last := createIn(t, s, "acme", policies[0], 1, time.Hour)[0]

	seen := map[string]bool{}
	for done := false; !done; {
		select {
		case w := <-wakes:
			if w.id == last.ID {
				done = true
				break
			}
			at, ok := want[w.id]
			switch {
			case !ok:
				t.Errorf("wake-up of %s, not a task of the batch", w.id)
			case seen[w.id]:
				t.Errorf("second wake-up of %s", w.id)
			case !w.due.Equal(at) || w.version != 1:
				t.Errorf("wake-up of %s at %v version %d, want %v version 1", w.id, w.due, w.version, at)
			}
			seen[w.id] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("heard of %d of the batch's %d tasks, and not of the next one", len(seen), len(want))
		}
	}
	if len(seen) != len(want) {
		t.Errorf("heard of %d of the batch's %d tasks", len(seen), len(want))
	}

	messages := 0
	for {
		m, err := sub.ReceiveMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(m.Payload, last.ID+" ") {
			break
		}
		messages++
	}
	if messages != len(policies) {
		t.Errorf("the batch's wake-ups came in %d messages, want one per partition (%d)", messages, len(policies))
	}
}

// A batch cut short after its reservations (a crash between the two steps)
// leaves no task; repeating it makes them all, with the reserved IDs.
func TestCreateBatchCutShort(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := redistest.URL(t)
	s := closeAtEnd(t, open(t, url, redistest.Prefix(t, url), redis.WithPartitions(8)))
	in := spread(300, policiesIn(s, 4))
	for _, tk := range in {
		tk.ID = store.NewID()
	}
	if err := redis.CreateBatchCutShort(ctx, s, in); err != nil {
		t.Fatal(err)
	}
	for _, tk := range in[:10] {
		if _, err := s.TaskGet(ctx, "acme", tk.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("TaskGet of an unfinished task = %v, want ErrNotFound", err)
		}
	}
	if n := len(liveTasks(t, s)); n != 0 {
		t.Errorf("%d live tasks after the cut-short batch, want none", n)
	}

	repeat := make([]*store.Task, len(in)+1)
	for i, tk := range in {
		c := *tk
		c.ID = "" // the client never learnt the IDs
		repeat[i] = &c
	}
	other := *in[7]
	other.ID, other.RequestHash = "", "another"
	repeat[len(in)] = &other
	for round, wantCreated := range []bool{true, false} {
		res, err := s.TaskCreateBatch(ctx, repeat)
		if err != nil {
			t.Fatal(err)
		}
		for i, tk := range in {
			if r := res[i]; r.Err != nil || r.Created != wantCreated || r.Task.ID != tk.ID {
				t.Fatalf("round %d, item %d = %+v, want task %s created %v", round, i, r, tk.ID, wantCreated)
			}
		}
		if err := res[len(in)].Err; !errors.Is(err, store.ErrConflict) {
			t.Errorf("round %d: another request with a reserved key = %v, want ErrConflict", round, err)
		}
	}
	for _, tk := range in[:10] {
		if got, err := s.TaskGet(ctx, "acme", tk.ID); err != nil || got.Version != 1 || got.Status != store.Pending {
			t.Errorf("TaskGet after the repeat = %+v, %v; want it PENDING at version 1", got, err)
		}
	}
	if n := len(liveTasks(t, s)); n != len(in) {
		t.Errorf("%d live tasks, want %d", n, len(in))
	}
}

// liveTasks returns the IDs of s's live tasks.
func liveTasks(t *testing.T, s *redis.Store) []string {
	t.Helper()
	var out []string
	if err := s.TaskDue(context.Background(), func(d store.Due) { out = append(out, d.ID) }); err != nil {
		t.Fatal(err)
	}
	return out
}

// What an item of a batch gives up, a later one takes, as if the items
// were created one after another: the idempotency key of an item whose ID
// was taken, and the ID of an item that turned out a repeat, even for
// another tenant.
func TestCreateBatchInOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := redistest.URL(t)
	prefix := redistest.Prefix(t, url)
	s := closeAtEnd(t, open(t, url, prefix))
	other := closeAtEnd(t, open(t, url, prefix)) // knows where tasks are from their records only
	task := func(tenant, key, hash, id string) *store.Task {
		return &store.Task{ID: id, Tenant: tenant, PolicyID: "p", IdempotencyKey: key, RequestHash: hash,
			TargetURL: "http://127.0.0.1:9/", Method: "POST", CreatedAt: t0}
	}
	old, _, err := s.TaskCreate(ctx, task("acme", "old", "h", ""))
	if err != nil {
		t.Fatal(err)
	}
	x, y := store.NewID(), store.NewID()
	in := []*store.Task{
		task("acme", "k", "h1", old.ID), // the ID is taken: conflict, and the key stays free
		task("acme", "k", "h2", ""),     // so this one takes it
		task("acme", "k", "h2", ""),     // and this one repeats it
		task("acme", "old", "h", x),     // a repeat: x is not needed
		task("beta", "n", "h", x),       // so another tenant's task takes it
		task("acme", "m", "h", y),
		task("acme", "o", "h", y), // y is taken by the one before
	}
	res, err := s.TaskCreateBatch(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		created bool
		id      string
		err     error
	}
	wants := []want{{err: store.ErrConflict}, {created: true}, {id: "1"}, {id: old.ID}, {created: true, id: x},
		{created: true, id: y}, {err: store.ErrConflict}}
	wants[2].id = res[1].Task.ID
	for i, w := range wants {
		r := res[i]
		if w.err != nil {
			if !errors.Is(r.Err, w.err) {
				t.Errorf("item %d = %+v, want %v", i, r, w.err)
			}
			continue
		}
		if r.Err != nil || r.Created != w.created || (w.id != "" && r.Task.ID != w.id) {
			t.Errorf("item %d = %+v, want created %v ID %q", i, r, w.created, w.id)
		}
	}
	if got, err := other.TaskGet(ctx, "beta", x); err != nil || got.IdempotencyKey != "n" {
		t.Errorf("TaskGet(beta, %s) = %+v, %v; want the task of key n", x, got, err)
	}
	if _, _, err := other.TaskCreate(ctx, task("acme", "k", "h1", "")); !errors.Is(err, store.ErrConflict) {
		t.Errorf("TaskCreate(the first request for k) = %v, want ErrConflict: k is the second's", err)
	}
	if got, created, err := other.TaskCreate(ctx, task("acme", "k", "h2", "")); err != nil || created || got.ID != res[1].Task.ID {
		t.Errorf("TaskCreate(the second request for k) = %+v created %v, %v; want task %s", got, created, err, res[1].Task.ID)
	}
	if got, created, err := other.TaskCreate(ctx, task("acme", "o", "h", "")); err != nil || !created {
		t.Errorf("TaskCreate(key o, ID free) = %+v created %v, %v; want created: the batch gave o up", got, created, err)
	}
	if n := len(liveTasks(t, s)); n != 5 {
		t.Errorf("%d live tasks, want 5", n)
	}
}
