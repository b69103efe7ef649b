package postgres_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/postgres"
)

// Open migrates the schema and returns a store that several retryd
// instances can share. It needs a server, so the example is not run.
func ExampleOpen() {
	ctx := context.Background()
	s, err := postgres.Open(ctx, "postgres://postgres@127.0.0.1:5432/test?sslmode=disable&pool_max_conns=8",
		postgres.WithSchema("retryd"))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	now := time.Now()
	task, _, err := s.TaskCreate(ctx, &store.Task{Tenant: "acme", IdempotencyKey: "order-42",
		TargetURL: "http://127.0.0.1:8081/hook", Method: "POST", Body: []byte(`{"order":42}`), PolicyID: "default"})
	if err != nil {
		log.Fatal(err)
	}
	claimed, err := s.TaskClaim(ctx, store.ClaimParams{Now: now, Lease: 30 * time.Second, IDs: []string{task.ID}})
	if err != nil || len(claimed) == 0 {
		log.Fatal("not claimed: ", err)
	}
	c := claimed[0]
	errs, err := s.TaskFinish(ctx, []store.Finish{{TaskID: c.ID, Version: c.Version, Status: store.Succeeded, Now: now,
		Attempt: store.Attempt{AttemptNumber: c.AttemptNumber, StartedAt: now, ResponseStatus: 200}}})
	if err != nil || errs[0] != nil {
		log.Fatal(errs, err)
	}
}

// Listen hands every instance the tasks that any instance made due, so the
// one that is free runs them; a scheduler passes its Wake method, and
// rescans the store after a reconnection. It needs a server, so the
// example is not run.
func ExampleStore_Listen() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := postgres.Open(ctx, "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	wake := func(d store.Due) { fmt.Println("due:", d.ID, d.At, d.Version) }
	rescans := 0
	go func() {
		err := s.Listen(ctx, wake, func() {
			if rescans++; rescans > 1 {
				fmt.Println("reconnected: rescan the store for what was missed")
			}
		})
		log.Println("listen ended:", err)
	}()
}
