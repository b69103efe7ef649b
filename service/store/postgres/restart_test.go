package postgres_test

import (
	"context"
	"math"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/postgres"
)

// TestSurvivesServerRestart restarts the PostgreSQL server under an open
// store: the store's calls fail while it is away and work again once it is
// back, with nothing lost, and Listen reconnects. It restarts the server
// every test on this machine shares, so it runs only when asked to.
func TestSurvivesServerRestart(t *testing.T) {
	if os.Getenv("RETRYKIT_DISRUPTIVE") != "1" {
		t.Skip("restarts the shared PostgreSQL server: set RETRYKIT_DISRUPTIVE=1 to run it")
	}
	ctx := context.Background()
	schema := newSchema(t)
	s := open(t, schema, postgres.WithReconnect(backoff.Policy{Kind: backoff.Fixed, Base: 100 * time.Millisecond}))
	l := startListen(t, s)
	k1 := mustCreate(t, s, newTask("k1", t0))
	l.expect(t, "create before the restart", k1.ID, t0)
	claimed, err := s.TaskClaim(ctx, store.ClaimParams{Now: t0, Lease: time.Hour, Limit: 1})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("TaskClaim = %d, %v", len(claimed), err)
	}

	out, err := exec.Command("sh", "-c",
		"pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql | sort -V | tail -n 1) main restart").CombinedOutput()
	if err != nil {
		t.Fatalf("restart: %v\n%s", err, out)
	}

	// The store's callers retry with the library's backoff, as retryd does.
	again := retry.Policy{Backoff: backoff.Policy{Kind: backoff.Fixed, Base: 200 * time.Millisecond},
		MaxAttempts: math.MaxInt32}
	bounded, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	got, err := retry.DoValue(bounded, again, func(ctx context.Context) (*store.Task, error) {
		return s.TaskGet(ctx, "acme", k1.ID)
	})
	if err != nil {
		t.Fatalf("TaskGet after the restart = %v", err)
	}
	if got.Status != store.InFlight || got.Version != claimed[0].Version {
		t.Errorf("after the restart the task is %s v%d, want IN_FLIGHT v%d", got.Status, got.Version, claimed[0].Version)
	}
	errs, err := s.TaskFinish(ctx, []store.Finish{{TaskID: k1.ID, Version: claimed[0].Version, Status: store.Succeeded,
		Now: t0, Attempt: store.Attempt{AttemptNumber: 1, StartedAt: t0, ResponseStatus: 200}}})
	if err != nil || errs[0] != nil {
		t.Fatalf("TaskFinish of the lease taken before the restart = %v, %v", errs, err)
	}

	l.waitListening(t)
	k2 := mustCreate(t, s, newTask("k2", t0.Add(time.Minute)))
	l.expect(t, "create after the restart", k2.ID, t0.Add(time.Minute))
	counts, err := s.TaskCounts(ctx)
	if err != nil || counts[store.Succeeded] != 1 || counts[store.Pending] != 1 || counts[store.InFlight] != 0 {
		t.Errorf("counts = %v, %v; want 1 SUCCEEDED and 1 PENDING", counts, err)
	}
}
