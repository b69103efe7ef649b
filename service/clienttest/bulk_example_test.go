package clienttest_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/retrykit/retry/client"
	"github.com/retrykit/retry/service/api"
	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/sqlite"
)

// Find out why dead letters failed, then redrive every one that failed on a
// 503, however many: RedriveAll repeats the bulk call until none is left.
func Example_redriveAll() {
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
	// Five tasks of the built-in default policy whose target answered 503
	// until they gave up, and one it timed out on: made dead through the
	// store here, where retryd's scheduler would have.
	for i := range 6 {
		task, _, err := c.CreateTask(ctx, client.TaskRequest{TargetURL: "https://api.example.com/orders"})
		if err != nil {
			fmt.Println(err)
			return
		}
		code, msg := http.StatusServiceUnavailable, "HTTP 503 Service Unavailable"
		if i == 5 {
			code, msg = 0, "context deadline exceeded"
		}
		giveUp(st, task.TaskID, code, msg)
	}

	causes, err := c.DeadLetterCauses(ctx, "")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, g := range causes.Items {
		fmt.Printf("%d × %s, e.g. %q\n", g.Count, g.Cause, g.Example)
	}
	n, err := c.RedriveAll(ctx, client.BulkFilter{TargetHost: "api.example.com", Cause: "HTTP 503", Limit: 2},
		func(done int) { fmt.Println("redriven so far:", done) })
	fmt.Println("redriven:", n, err)
	// Output:
	// 5 × HTTP 503, e.g. "HTTP 503 Service Unavailable"
	// 1 × timeout, e.g. "context deadline exceeded"
	// redriven so far: 2
	// redriven so far: 4
	// redriven so far: 5
	// redriven: 5 <nil>
}

// giveUp records one failed attempt that exhausts the task, as the
// scheduler would.
func giveUp(st store.Store, id string, code int, msg string) {
	ctx := context.Background()
	now := time.Now()
	ts, err := st.TaskClaim(ctx, store.ClaimParams{Now: now, Lease: time.Minute, IDs: []string{id}})
	if err != nil || len(ts) != 1 {
		panic(fmt.Sprint("TaskClaim: ", ts, err))
	}
	if _, err := st.TaskFinish(ctx, []store.Finish{{TaskID: id, Version: ts[0].Version, Status: store.Exhausted,
		Attempt:   store.Attempt{AttemptNumber: 1, StartedAt: now, ResponseStatus: code, ErrorMessage: msg},
		LastError: msg, LastStatus: code, Now: now}}); err != nil {
		panic(err)
	}
}
