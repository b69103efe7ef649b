package scheduler_test

import (
	"context"
	"testing"
	"time"

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
	// Run may not have started yet: wait until it hands out.
	_, got := s.Reserve(1)
	for deadline := time.Now().Add(10 * time.Second); got == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
		_, got = s.Reserve(1)
	}
	s.Release(got)
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
