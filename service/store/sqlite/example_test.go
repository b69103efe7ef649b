package sqlite_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/sqlite"
)

// A task's life in the embedded store: created, claimed with a lease,
// finished with a retry, claimed again and finished for good.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "retryd")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(dir, "retryd.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	now := time.Date(2031, 1, 1, 12, 0, 0, 0, time.UTC)
	task, _, err := s.TaskCreate(ctx, &store.Task{Tenant: "acme", IdempotencyKey: "order-42",
		TargetURL: "http://127.0.0.1:8081/hook", Method: "POST", Body: []byte(`{"order":42}`),
		PolicyID: "default", CreatedAt: now})
	if err != nil {
		log.Fatal(err)
	}
	for attempt := 1; ; attempt++ {
		claimed, err := s.TaskClaim(ctx, store.ClaimParams{Now: now, Lease: 30 * time.Second, Limit: 10})
		if err != nil {
			log.Fatal(err)
		}
		c := claimed[0]
		f := store.Finish{TaskID: c.ID, Version: c.Version, Now: now,
			Attempt: store.Attempt{AttemptNumber: c.AttemptNumber, StartedAt: now, ResponseStatus: 503}}
		if attempt == 1 {
			f.Status, f.NextAttemptAt, f.LastStatus = store.Pending, now.Add(time.Second), 503
		} else {
			f.Status, f.Attempt.ResponseStatus, f.LastStatus = store.Succeeded, 200, 200
		}
		if _, err := s.TaskFinish(ctx, []store.Finish{f}); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("attempt %d: %d\n", c.AttemptNumber, f.Attempt.ResponseStatus)
		if f.Status != store.Pending {
			break
		}
		now = f.NextAttemptAt
	}
	got, err := s.TaskGet(ctx, "acme", task.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(got.Status, got.AttemptNumber)
	// Output:
	// attempt 1: 503
	// attempt 2: 200
	// SUCCEEDED 2
}
