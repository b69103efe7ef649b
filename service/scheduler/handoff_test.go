package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/retrykit/retry/service/scheduler"
	"github.com/retrykit/retry/service/store"
)

// Reserve hands out free workers only while the scheduler runs, never more
// than it has; Release gives them back; and a task started on one runs as
// a claimed task does, once.
func TestHandoffReservesWorkers(t *testing.T) {
	st := openStore(t, "")
	putPolicy(t, st, "p", fast(1))
	tg := newTarget(t, 200)
	s, stop := start(t, st, options{cfg: schedulerConfig(time.Hour)})
	s.Release(reserveRunning(t, s, 1))
	lease, got := s.Reserve(1000)
	if got != 512 || lease != 10*time.Second {
		t.Fatalf("Reserve(1000) = %v, %d; want the lease, 10s, and every worker, 512", lease, got)
	}
	if _, more := s.Reserve(1); more != 0 {
		t.Errorf("Reserve with every worker taken = %d, want 0", more)
	}
	s.Release(got - 1)

	// The one kept runs a task claimed as the store would have created it.
	task := addTask(t, st, tg.URL, "p")
	claimed, err := st.TaskClaim(context.Background(), store.ClaimParams{Now: time.Now(), Lease: lease, IDs: []string{task.ID}})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("TaskClaim = %v, %v", claimed, err)
	}
	s.Start(claimed[0])
	if done := waitFor(t, st, task.ID, terminal); done.Status != store.Succeeded || len(tg.seen()) != 1 {
		t.Errorf("started task = %s after %d requests, want SUCCEEDED after 1", done.Status, len(tg.seen()))
	}

	// A reservation holds shutdown until it is given back.
	_, held := s.Reserve(1)
	stopped := make(chan struct{})
	go func() {
		stop()
		close(stopped)
	}()
	select {
	case <-stopped:
		t.Fatal("Run returned while a worker was reserved")
	case <-time.After(200 * time.Millisecond):
	}
	s.Release(held)
	<-stopped
	if _, got := s.Reserve(1); got != 0 {
		t.Errorf("Reserve after Run returned = %d, want 0", got)
	}
}

// Forgo hands back unsent a task the store created claimed though its
// create's answer was lost: PENDING, its attempt not charged, and then run
// once as any task; a task the store never created costs nothing.
func TestHandoffForgo(t *testing.T) {
	st := openStore(t, "")
	putPolicy(t, st, "p", fast(1))
	tg := newTarget(t, 200)
	s, _ := start(t, st, options{cfg: schedulerConfig(time.Hour)})
	if got := reserveRunning(t, s, 2); got != 2 {
		t.Fatalf("Reserve(2) = %d", got)
	}
	now := time.Now()
	made := &store.Task{ID: store.NewID(), Tenant: tenant, TargetURL: tg.URL, Method: "POST", PolicyID: "p",
		RequestHash: "h", CreatedAt: now, LeaseUntil: now.Add(10 * time.Second)}
	if c, _, err := st.TaskCreate(context.Background(), made); err != nil || c.Status != store.InFlight {
		t.Fatalf("TaskCreate = %v, %v; want it created claimed", c, err)
	}
	ghost := &store.Task{ID: store.NewID(), Tenant: tenant, TargetURL: tg.URL, Method: "POST", PolicyID: "p",
		CreatedAt: now, LeaseUntil: now.Add(10 * time.Second)}
	s.Forgo([]*store.Task{made, ghost})
	done := waitFor(t, st, made.ID, terminal)
	if done.Status != store.Succeeded || done.AttemptNumber != 1 || len(tg.seen()) != 1 {
		t.Errorf("forgone task = %s at attempt %d after %d requests; want SUCCEEDED at 1 after 1", done.Status,
			done.AttemptNumber, len(tg.seen()))
	}
	if log := attempts(t, st, made.ID); len(log) != 1 || log[0].AttemptNumber != 1 {
		t.Errorf("attempt log = %+v, want only attempt 1, the one sent", log)
	}
	_, all := s.Reserve(1000)
	s.Release(all)
	if all != 512 {
		t.Errorf("Reserve(1000) after Forgo = %d, want every worker back", all)
	}
}

// reserveRunning reserves n workers once s hands them out: Run, started by
// start, may not have begun yet.
func reserveRunning(t *testing.T, s *scheduler.Scheduler, n int) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, got := s.Reserve(n); got > 0 || time.Now().After(deadline) {
			return got
		}
	}
}
