package scheduler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/service/dispatch"
	"github.com/retrykit/retry/service/scheduler"
	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/sqlite"
)

// A task against a target that fails twice, run to success.
func Example() {
	ctx := context.Background()
	var calls atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer target.Close()

	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "retryd.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	spec, _ := json.Marshal(retry.Policy{MaxAttempts: 5, Backoff: backoff.Policy{Kind: backoff.Fixed, Base: 10 * time.Millisecond, Max: time.Second}})
	st.PolicyPut(ctx, &store.Policy{Tenant: "acme", ID: "webhooks", Spec: spec})
	task, _, _ := st.TaskCreate(ctx, &store.Task{Tenant: "acme", TargetURL: target.URL, Method: "POST", PolicyID: "webhooks"})

	// The target is on 127.0.0.1, which the dispatcher refuses unless told.
	d := dispatch.New(dispatch.Config{Guard: dispatch.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}})
	defer d.Close()
	s, err := scheduler.New(scheduler.Config{Store: st, Dispatcher: d})
	if err != nil {
		fmt.Println(err)
		return
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- s.Run(runCtx) }()
	for {
		t, _ := st.TaskGet(ctx, "acme", task.ID)
		if t.Status.Terminal() {
			fmt.Println(t.Status, "after", t.AttemptNumber, "attempts")
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	<-done
	// Output: SUCCEEDED after 3 attempts
}
