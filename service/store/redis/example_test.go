package redis_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/redis"
)

// A task's life in the Redis store: created, claimed with a lease, and
// finished. (Not run as a test: it needs a server.)
func ExampleOpen() {
	ctx := context.Background()
	s, err := redis.Open(ctx, "redis://127.0.0.1:6379/0", redis.WithPrefix("example:"))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	task, _, err := s.TaskCreate(ctx, &store.Task{Tenant: "acme", IdempotencyKey: "order-42",
		TargetURL: "http://127.0.0.1:8081/hook", Method: "POST", Body: []byte(`{"order":42}`), PolicyID: "default"})
	if err != nil {
		log.Fatal(err)
	}
	claimed, err := s.TaskClaim(ctx, store.ClaimParams{Lease: 30 * time.Second, IDs: []string{task.ID}})
	if err != nil || len(claimed) == 0 {
		log.Fatal("not claimed: ", err)
	}
	c := claimed[0]
	errs, err := s.TaskFinish(ctx, []store.Finish{{TaskID: c.ID, Version: c.Version, Status: store.Succeeded,
		LastStatus: 200, Attempt: store.Attempt{AttemptNumber: c.AttemptNumber, StartedAt: time.Now(), ResponseStatus: 200}}})
	if err != nil || errs[0] != nil {
		log.Fatal(err, errs)
	}
	fmt.Println("task", task.ID, "partition", s.Partition("acme", "default"))
}

// Instances that share a store learn of each other's new and retried tasks
// through Listen; a scheduler passes its Wake method. Here instance b
// claims partitions 0 to 7 of 16, another instance the rest.
func ExampleStore_Listen() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b, err := redis.Open(ctx, "redis://127.0.0.1:6379/0", redis.WithPrefix("example:"),
		redis.WithPartitions(16), redis.WithClaimPartitions(0, 1, 2, 3, 4, 5, 6, 7))
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	wake := func(d store.Due) { fmt.Println("due:", d.ID, d.At, d.Version) } // scheduler.Wake
	resync := func() { fmt.Println("subscribed: look for what was missed") } // scheduler's resync
	go func() {
		if err := b.Listen(ctx, wake, resync); err != nil && ctx.Err() == nil {
			log.Print(err)
		}
	}()
}
