package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

// TestFailureInASharedTransaction queues writes behind one that holds the
// writer, so that they share the next transaction, and has one of them
// fail after writing and another refuse its change: each is answered on
// its own, the failed one leaves nothing behind, the others are committed.
func TestFailureInASharedTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := open(t)
	defer s.Close()
	first, _, err := s.TaskCreate(ctx, &store.Task{Tenant: "t", IdempotencyKey: "taken", RequestHash: "a", TargetURL: "http://x/",
		Method: "GET", PolicyID: "p", CreatedAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan struct{})
	go s.WriteForTest(ctx, func(func(string, ...any) error) error {
		close(held)
		time.Sleep(200 * time.Millisecond) // the others queue meanwhile
		return nil
	})
	<-held
	var wg sync.WaitGroup
	const creates = 8
	createErrs := make([]error, creates)
	for i := range creates {
		wg.Go(func() {
			_, _, createErrs[i] = s.TaskCreate(ctx, &store.Task{Tenant: "t", IdempotencyKey: fmt.Sprint("k", i),
				RequestHash: "h", TargetURL: "http://x/", Method: "GET", PolicyID: "p", CreatedAt: t0})
		})
	}
	var refused, failed error
	wg.Go(func() {
		_, _, refused = s.TaskCreate(ctx, &store.Task{Tenant: "t", IdempotencyKey: "taken", RequestHash: "other",
			TargetURL: "http://x/", Method: "GET", PolicyID: "p", CreatedAt: t0})
	})
	boom := errors.New("boom")
	wg.Go(func() {
		failed = s.WriteForTest(ctx, func(exec func(string, ...any) error) error {
			if err := exec(`INSERT INTO policies (tenant, id, spec, created_at) VALUES ('t', 'doomed', x'', 0)`); err != nil {
				return err
			}
			return boom
		})
	})
	wg.Wait()

	for i, err := range createErrs {
		if err != nil {
			t.Errorf("create %d = %v, want it committed", i, err)
		}
	}
	if !errors.Is(refused, store.ErrConflict) {
		t.Errorf("create reusing a key = %v, want ErrConflict", refused)
	}
	if !errors.Is(failed, boom) {
		t.Errorf("failing write = %v, want its own error", failed)
	}
	if _, err := s.PolicyGet(ctx, "t", "doomed"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("PolicyGet(doomed) = %v, want ErrNotFound: the failed write left its row", err)
	}
	tasks, _, err := s.TaskList(ctx, store.TaskFilter{Tenant: "t"}, store.Page{})
	if err != nil {
		t.Fatal(err)
	}
	counts, err := s.TaskCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(tasks), creates+1; got != want {
		t.Errorf("%d tasks stored, want %d", got, want)
	}
	if got, want := counts[store.Pending], int64(creates+1); got != want {
		t.Errorf("PENDING count = %d, want %d", got, want)
	}
	if stored, err := s.TaskGet(ctx, "t", first.ID); err != nil || stored.RequestHash != "a" {
		t.Errorf("TaskGet(first) = %v, %v; want the first request's task", stored, err)
	}
}
