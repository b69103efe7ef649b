package client_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/client"
)

// Register a policy, submit a task under an idempotency key, and submit it
// again: the repeat returns the same task. (service/clienttest runs this
// against a real retryd.)
func Example() {
	ctx := context.Background()
	c := client.New("http://127.0.0.1:8080", "") // a running retryd, and its token if auth is on
	_, created, err := c.PutPolicy(ctx, client.Policy{ID: "webhooks", Settings: retry.Policy{MaxAttempts: 5}})
	fmt.Println("policy created:", created, err)

	req := client.TaskRequest{TargetURL: "https://example.com/hook", PolicyID: "webhooks", Body: `{"event":"paid"}`, IdempotencyKey: "order-42"}
	first, created, err := c.CreateTask(ctx, req)
	fmt.Println("task created:", created, first.Status, err)
	again, created, _ := c.CreateTask(ctx, req)
	fmt.Println("repeat created:", created, "same task:", again.TaskID == first.TaskID)

	_, err = c.GetPolicy(ctx, "missing")
	fmt.Println(errors.Is(err, client.ErrNotFound), err)
}

// Submit several tasks in one request: each gets its own answer, and a
// refused one does not stop the others.
func ExampleClient_CreateTasks() {
	ctx := context.Background()
	c := client.New("http://127.0.0.1:8080", "")
	tomorrow := client.MillisOf(time.Now().Add(24 * time.Hour))
	results, err := c.CreateTasks(ctx, []client.TaskRequest{
		{TargetURL: "https://example.com/hook", PolicyID: "webhooks", IdempotencyKey: "order-42"},
		{TargetURL: "https://example.com/reminder", PolicyID: "webhooks", NotBefore: tomorrow},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, r := range results {
		fmt.Println(i, r.Status, r.Created(), r.Err())
	}
}

// Redrive every dead letter that failed on a 503 from one host, however
// many there are: RedriveAll repeats the bulk call until none is left.
func ExampleClient_RedriveAll() {
	ctx := context.Background()
	c := client.New("http://127.0.0.1:8080", "")
	causes, err := c.DeadLetterCauses(ctx, "")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, g := range causes.Items {
		fmt.Printf("%6d  %s  e.g. %s\n", g.Count, g.Cause, g.Example)
	}
	n, err := c.RedriveAll(ctx, client.BulkFilter{TargetHost: "api.example.com", Cause: "HTTP 503"},
		func(done int) { fmt.Println("redriven so far:", done) })
	fmt.Println("redriven:", n, err)
}

// Create a destination that signs what it sends, keep the signing secret
// the service made (it is shown this once), and send a task to it by path:
// the task follows the destination if its URL or token change later.
func ExampleClient_CreateDestination() {
	ctx := context.Background()
	c := client.New("http://127.0.0.1:8080", "")
	d, created, err := c.CreateDestination(ctx, client.Destination{
		ID:        "orders",
		URL:       "https://api.example.com/hooks",
		Auth:      &client.DestinationAuth{Type: client.AuthBearer, Token: client.Secret{Value: os.Getenv("ORDERS_TOKEN")}},
		Signing:   &client.Signing{}, // no secret given: the service makes one
		RateLimit: &client.RateLimit{PerSecond: 50},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if created {
		fmt.Println("give the receiver its signing secret:", d.Signing.Secret.Value)
	}
	t, _, err := c.CreateTask(ctx, client.TaskRequest{DestinationID: "orders", Path: "/paid", Body: `{"order":42}`})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(t.TaskID, t.DestinationID, t.Path)
}

// Change a destination without undoing a change made by someone else in
// between: read it, edit it, and patch at the version read. Its secrets
// read as set, and a patch that sends them so keeps them.
func ExampleClient_PatchDestination() {
	ctx := context.Background()
	c := client.New("http://127.0.0.1:8080", "")
	d, err := c.GetDestination(ctx, "orders")
	if err != nil {
		fmt.Println(err)
		return
	}
	d.RateLimit = &client.RateLimit{PerSecond: 20}
	d, err = c.PatchDestination(ctx, "orders", d, d.Version)
	switch {
	case errors.Is(err, client.ErrConflict):
		fmt.Println("changed meanwhile; read it again")
		return
	case err != nil:
		fmt.Println(err)
		return
	}
	fmt.Println("now at version", d.Version)
	// A map removes a setting with nil.
	_, err = c.PatchDestination(ctx, "orders", map[string]any{"rateLimit": nil}, 0)
	fmt.Println(err)
}
