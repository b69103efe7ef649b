package clienttest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/client"
	"github.com/retrykit/retry/service/api"
	"github.com/retrykit/retry/service/destination"
	"github.com/retrykit/retry/service/destination/secrets"
	"github.com/retrykit/retry/service/store/sqlite"
)

// Register a policy, submit a task under an idempotency key, and submit it
// again: the repeat returns the same task.
func Example_client() {
	// A retryd API over an embedded store; in real use, the URL of a
	// running retryd.
	dir, _ := os.MkdirTemp("", "client-example")
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "retryd.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	h, _ := api.New(api.Config{Store: st})
	srv := httptest.NewServer(h)
	defer srv.Close()

	ctx := context.Background()
	c := client.New(srv.URL, "")
	_, created, err := c.PutPolicy(ctx, client.Policy{ID: "webhooks", Settings: retry.Policy{MaxAttempts: 5}})
	fmt.Println("policy created:", created, err)

	req := client.TaskRequest{TargetURL: "https://example.com/hook", PolicyID: "webhooks", Body: `{"event":"paid"}`, IdempotencyKey: "order-42"}
	first, created, err := c.CreateTask(ctx, req)
	fmt.Println("task created:", created, first.Status, err)
	again, created, _ := c.CreateTask(ctx, req)
	fmt.Println("repeat created:", created, "same task:", again.TaskID == first.TaskID)

	_, err = c.GetPolicy(ctx, "missing")
	fmt.Println(errors.Is(err, client.ErrNotFound), err)
	// Output:
	// policy created: true <nil>
	// task created: true PENDING <nil>
	// repeat created: false same task: true
	// true retryd: 404 not_found: policy not found
}

// Submit several tasks in one request: each gets its own answer, and a
// refused one does not stop the others.
func Example_createTasks() {
	dir, _ := os.MkdirTemp("", "client-example")
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "retryd.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	h, _ := api.New(api.Config{Store: st})
	srv := httptest.NewServer(h)
	defer srv.Close()

	ctx := context.Background()
	c := client.New(srv.URL, "")
	if _, _, err := c.PutPolicy(ctx, client.Policy{ID: "webhooks"}); err != nil {
		fmt.Println(err)
		return
	}
	tomorrow := client.MillisOf(time.Now().Add(24 * time.Hour))
	results, err := c.CreateTasks(ctx, []client.TaskRequest{
		{TargetURL: "https://example.com/hook", PolicyID: "webhooks", IdempotencyKey: "order-42"},
		{TargetURL: "https://example.com/reminder", PolicyID: "webhooks", NotBefore: tomorrow},
		{TargetURL: "ftp://example.com/", PolicyID: "webhooks"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, r := range results {
		fmt.Println(i, r.Status, r.Created(), r.Err())
	}
	fmt.Println("reminder due tomorrow:", results[1].Task.NextAttemptAt == tomorrow)
	// Output:
	// 0 201 true <nil>
	// 1 201 true <nil>
	// 2 400 false retryd: 400 invalid_request (tasks[2].targetUrl): tasks[2].targetUrl: must be an http or https URL
	// reminder due tomorrow: true
}

// Create a destination, send a task to it by path, and see that its
// secrets are never shown back but for the signing secret the service
// made, once; it cannot be deleted while the task is live.
func Example_destinations() {
	dir, _ := os.MkdirTemp("", "client-example")
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "retryd.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	// Destinations need a secrets key, as retryd --secrets-key-file gives.
	keys, _ := secrets.NewKeyring(bytes.Repeat([]byte{1}, secrets.KeySize))
	h, _ := api.New(api.Config{Store: st, Keys: keys, DestinationBounds: destination.Bounds{MaxTimeout: 30 * time.Second}})
	srv := httptest.NewServer(h)
	defer srv.Close()

	ctx := context.Background()
	c := client.New(srv.URL, "")
	d, created, err := c.CreateDestination(ctx, client.Destination{
		ID: "orders", URL: "https://api.example.com/hooks",
		Auth:    &client.DestinationAuth{Type: client.AuthBearer, Token: client.Secret{Value: "s3cr3t"}},
		Signing: &client.Signing{},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("created:", created, "token shown:", d.Auth.Token.Value != "", "token set:", d.Auth.Token.Set)
	fmt.Println("signing secret made:", strings.HasPrefix(d.Signing.Secret.Value, "whsec_"))

	t, _, err := c.CreateTask(ctx, client.TaskRequest{DestinationID: "orders", Path: "/paid"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("task: destination %s, path %s, targetUrl %q\n", t.DestinationID, t.Path, t.TargetURL)

	err = c.DeleteDestination(ctx, "orders")
	fmt.Println("delete while the task is pending:", errors.Is(err, client.ErrConflict))
	_, _ = c.CancelTask(ctx, t.TaskID)
	fmt.Println("delete once it is cancelled:", c.DeleteDestination(ctx, "orders"))
	// Output:
	// created: true token shown: false token set: true
	// signing secret made: true
	// task: destination orders, path /paid, targetUrl ""
	// delete while the task is pending: true
	// delete once it is cancelled: <nil>
}
