package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

// waitFor bounds every wait for the feed, so that a missing report fails
// a test rather than hanging it; it is not a measure of speed.
const waitFor = 20 * time.Second

// listener runs a store's Listen for a test.
type listener struct {
	heard     chan store.Due
	listening chan struct{}
	done      chan struct{} // closed once Listen has returned err
	err       error
	cancel    context.CancelFunc
}

// listen runs s's Listen until t ends, and returns once it is listening.
func listen(t *testing.T, s store.Store) *listener {
	t.Helper()
	f, ok := s.(store.Feed)
	if !ok {
		t.Fatalf("%T is not a store.Feed", s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &listener{heard: make(chan store.Due, 100), listening: make(chan struct{}, 10), done: make(chan struct{}),
		cancel: cancel}
	go func() {
		defer close(l.done)
		l.err = f.Listen(ctx, func(d store.Due) { l.heard <- d }, func() { l.listening <- struct{}{} })
	}()
	t.Cleanup(func() {
		cancel()
		<-l.done
	})
	select {
	case <-l.listening:
	case <-l.done:
		t.Fatalf("Listen returned %v before listening", l.err)
	case <-time.After(waitFor):
		t.Fatalf("not listening after %v", waitFor)
	}
	return l
}

// result waits for Listen to return and returns its error.
func (l *listener) result(t *testing.T) error {
	t.Helper()
	select {
	case <-l.done:
		return l.err
	case <-time.After(waitFor):
		t.Fatalf("Listen did not return within %v", waitFor)
		return nil
	}
}

// expect fails t unless the next reports l hears are of the tasks ids, in
// any order (a batch's tasks may come in any), each with the due time and
// the version that TaskGet on s now answers.
func (l *listener) expect(t *testing.T, what string, s store.Store, ids ...string) {
	t.Helper()
	want := map[string]store.Due{}
	for _, id := range ids {
		want[id] = get(t, s, tenant, id).Due()
	}
	for range ids {
		select {
		case d := <-l.heard:
			w, ok := want[d.ID]
			switch {
			case !ok:
				t.Errorf("%s: heard of %s (due %v, version %d), want one of %v", what, d.ID, d.At, d.Version, ids)
			case !d.At.Equal(w.At.Truncate(time.Millisecond)) || d.Version != w.Version:
				t.Errorf("%s: heard %s due %v version %d, want due %v version %d", what, d.ID, d.At, d.Version,
					w.At, w.Version)
			}
			delete(want, d.ID)
		case <-time.After(waitFor):
			t.Fatalf("%s: no report of %v within %v", what, ids, waitFor)
		}
	}
}

// testFeed checks store.Feed on a store that implements it, and skips one
// that does not.
func testFeed(t *testing.T, newStore NewStore) {
	s := setup(t, newStore)
	if _, ok := s.(store.Feed); !ok {
		t.Skipf("%T is not a store.Feed", s)
	}
	t.Run("reports", func(t *testing.T) { testFeedReports(t, s) })
	t.Run("context ends", func(t *testing.T) {
		t.Parallel()
		l := listen(t, setup(t, newStore))
		l.cancel()
		if err := l.result(t); !errors.Is(err, context.Canceled) {
			t.Errorf("Listen after its context ended = %v, want context.Canceled", err)
		}
	})
	t.Run("store closed", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newStore)
		l := listen(t, s)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := l.result(t); !errors.Is(err, store.ErrClosed) {
			t.Errorf("Listen after Close = %v, want ErrClosed", err)
		}
		called := false
		err := s.(store.Feed).Listen(context.Background(), func(store.Due) {}, func() { called = true })
		if !errors.Is(err, store.ErrClosed) || called {
			t.Errorf("Listen on a closed store = %v, onListening called %v; want ErrClosed, not called", err, called)
		}
	})
}

// sub is less than a millisecond, added to the times the feed reports so
// that they are not whole milliseconds: reports are cut to the
// millisecond as the store keeps them.
const sub = 1500 * time.Microsecond

// testFeedReports makes every change the feed reports, and some it does
// not, which would show as a report out of turn.
func testFeedReports(t *testing.T, s store.Store) {
	ctx := context.Background()
	l := listen(t, s)

	in := newTask(tenant, "k1")
	in.NextAttemptAt = t0.Add(time.Hour + sub)
	k1 := create(t, s, in)
	l.expect(t, "create", s, k1.ID)

	// A repeat creates nothing, a conflicting key nothing either.
	k2, k3 := newTask(tenant, "k2"), newTask(tenant, "k3")
	k3.NextAttemptAt = t0.Add(-time.Hour)
	conflict := newTask(tenant, "k1")
	conflict.RequestHash = "another"
	res, err := s.TaskCreateBatch(ctx, []*store.Task{newTask(tenant, "k1"), k2, conflict, k3})
	if err != nil || len(res) != 4 || !res[1].Created || !res[3].Created || res[0].Created || res[2].Err == nil {
		t.Fatalf("TaskCreateBatch = %v, %v; want k2 and k3 created", res, err)
	}
	k2, k3 = res[1].Task, res[3].Task
	l.expect(t, "batch create", s, k2.ID, k3.ID)

	c := claimOne(t, s, t0, k2.ID)
	retry := finishOf(c, store.Pending, t0.Add(sub))
	retry.NextAttemptAt = t0.Add(5*time.Second + sub)
	if errs, err := s.TaskFinish(ctx, []store.Finish{retry}); err != nil || errs[0] != nil {
		t.Fatalf("TaskFinish(retry) = %v, %v", errs, err)
	}
	l.expect(t, "retry", s, k2.ID)

	// A claim, a finish that ends a task and a cancel report nothing.
	finish(t, s, claimOne(t, s, t0.Add(time.Hour+sub), k1.ID), store.Succeeded, t0.Add(time.Hour+2*sub))
	if _, err := cancel(s, tenant, k3.ID, t0); err != nil {
		t.Fatalf("cancel = %v", err)
	}
	finish(t, s, claimOne(t, s, t0.Add(5*time.Second+sub), k2.ID), store.Exhausted, t0.Add(6*time.Second))
	if _, err := redrive(s, tenant, k2.ID, t0.Add(3*time.Hour+sub)); err != nil {
		t.Fatalf("redrive = %v", err)
	}
	l.expect(t, "redrive after a claim, a success, a cancel and an exhausted finish", s, k2.ID)

	// One TaskFinish reports its retries only.
	ts := createN(t, s, tenant, "more", 3)
	l.expect(t, "creates", s, ts[0].ID, ts[1].ID, ts[2].ID)
	claimed := claim(t, s, t0, 3, ts[0].ID, ts[1].ID, ts[2].ID)
	if len(claimed) != 3 {
		t.Fatalf("claimed %d tasks, want 3", len(claimed))
	}
	var fs []store.Finish
	var retried []string
	for i, c := range claimed {
		status := store.Pending
		if i == 1 {
			status = store.Failed
		} else {
			retried = append(retried, c.ID)
		}
		fs = append(fs, finishOf(c, status, t0.Add(time.Duration(i)*time.Second)))
	}
	if errs, err := s.TaskFinish(ctx, fs); err != nil || errs[0] != nil || errs[1] != nil || errs[2] != nil {
		t.Fatalf("TaskFinish = %v, %v", errs, err)
	}
	l.expect(t, "finish of two retries and a failure", s, retried...)
	last := create(t, s, newTask(tenant, "last"))
	l.expect(t, "create after the failure", s, last.ID)
}

// testFeedShared checks that every instance hears of the changes of every
// other, its own included.
func testFeedShared(t *testing.T, a, b store.Store) {
	if _, ok := a.(store.Feed); !ok {
		t.Skipf("%T is not a store.Feed", a)
	}
	ctx := context.Background()
	ls := []*listener{listen(t, a), listen(t, b)}
	expect := func(what string, ids ...string) {
		t.Helper()
		for i, l := range ls {
			l.expect(t, fmt.Sprintf("%s, heard by store %d", what, i+1), a, ids...)
		}
	}
	k1 := create(t, b, newTask(tenant, "k1"))
	expect("create on the second store", k1.ID)
	res, err := a.TaskCreateBatch(ctx, []*store.Task{newTask(tenant, "k2"), newTask(tenant, "k3")})
	if err != nil || !res[0].Created || !res[1].Created {
		t.Fatalf("TaskCreateBatch = %v, %v", res, err)
	}
	expect("batch create on the first store", res[0].Task.ID, res[1].Task.ID)
	c := claimOne(t, b, t0, k1.ID)
	finish(t, b, c, store.Pending, t0.Add(sub))
	expect("retry on the second store", k1.ID)
	finish(t, a, claimOne(t, a, t0.Add(time.Hour), k1.ID), store.Failed, t0.Add(time.Hour))
	if _, err := redrive(b, tenant, k1.ID, t0.Add(2*time.Hour+sub)); err != nil {
		t.Fatalf("redrive = %v", err)
	}
	expect("redrive on the second store", k1.ID)
}
