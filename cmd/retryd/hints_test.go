package main_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/retrykit/retry/service/store/postgres/pgtest"
	"github.com/retrykit/retry/service/store/redis/redistest"
)

// One stale wake-up on a shared store's change feed, arriving after a
// task's first attempt was recorded, used to make the scheduler claim the
// task early, have the claim refused, and forget the task until the
// one-minute resync: its retry, due a second later, came 36–55 s late.
// Here the stale notes come as this retryd writes them (with the version of
// the task's creation) and as an older one did (without a version); the
// retry must come well before any resync could rescue it.
func TestStaleFeedNoteLeavesTheRetryOnTime(t *testing.T) {
	t.Parallel()
	for _, bc := range sharedBackends() {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			b := bc.make(t)
			target := newFlaky(t)
			d := startFleet(t, b, 1, "--lease", "30s", "--attempt-timeout", "5s")[0]
			d.putPolicy("second", map[string]any{"backoff": "FIXED", "initialDelayMs": 1000, "jitterType": "NONE", "maxAttempts": 3})
			tk := d.submit(target.URL+"/fail/1", "second")
			d.waitTask(tk.TaskID, func(got task) bool { return got.AttemptNumber == 1 && got.Status == "PENDING" })
			for _, note := range []string{
				fmt.Sprintf("%s %d 1", tk.TaskID, tk.CreatedAt),
				fmt.Sprintf("%s %d", tk.TaskID, tk.CreatedAt),
			} {
				publish(t, b, note)
			}
			// waitTask gives up after 30 s, before the resync at a minute.
			got := d.waitTask(tk.TaskID, terminal)
			if got.Status != "SUCCEEDED" || got.AttemptNumber != 2 {
				t.Fatalf("task %s after %d attempts, want SUCCEEDED after 2", got.Status, got.AttemptNumber)
			}
		})
	}
}

// publish sends note on b's change feed as a store would: a NOTIFY on the
// schema's channel, or a PUBLISH on every partition's wake-up channel.
func publish(t *testing.T, b backend, note string) {
	t.Helper()
	ctx := context.Background()
	switch b.name {
	case "postgres":
		conn := pgtest.Admin(t)
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "SELECT pg_notify($1, $2)", "retrykit."+b.flags[1], note); err != nil {
			t.Fatal(err)
		}
	case "redis":
		c := redistest.Client(t, b.store)
		defer c.Close()
		for p := range 16 { // retryd's default partitions
			if err := c.Publish(ctx, b.flags[1]+"wake:"+fmt.Sprint(p), note).Err(); err != nil {
				t.Fatal(err)
			}
		}
	default:
		t.Fatalf("no change feed for %s", b.name)
	}
}
