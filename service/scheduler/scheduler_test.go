package scheduler_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/service/scheduler"
	"github.com/retrykit/retry/service/store"
)

func TestOutcomes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		script       []int
		policy       retry.Policy
		wantStatus   store.Status
		wantAttempts int // at least this many
		wantMost     int // and at most this many; 0 means exactly wantAttempts
		wantLastErr  string
	}{
		{"success at once", []int{200}, fast(3), store.Succeeded, 1, 0, ""},
		{"success after two failures", []int{503, 500, 204}, fast(5), store.Succeeded, 3, 0, ""},
		{"400 fails at once", []int{400, 200}, fast(5), store.Failed, 1, 0, "HTTP 400 Bad Request"},
		{"redirect fails at once", []int{302, 200}, fast(5), store.Failed, 1, 0, "redirect not followed: HTTP 302"},
		{"attempts exhausted", []int{503}, fast(3), store.Exhausted, 3, 0, "HTTP 503 Service Unavailable (attempts exhausted)"},
		{"status listed by the policy", []int{409, 409, 200},
			retry.Policy{MaxAttempts: 5, Backoff: backoffFixed(time.Millisecond), RetryableStatusCodes: []int{409}}, store.Succeeded, 3, 0, ""},
		{"budget exhausted", []int{503},
			retry.Policy{MaxAttempts: 100, Backoff: backoffFixed(1500 * time.Millisecond), Budget: 4 * time.Second},
			// After attempt 1 (a few ms in) another fits; after attempt 3
			// (3s+ in) none does; after attempt 2 it depends on how long the
			// calls took. Seconds, not milliseconds: on a loaded machine a
			// task claimed late would otherwise find its budget spent before
			// attempt 2 is sent, a different (and right) ending.
			store.Exhausted, 2, 3, "HTTP 503 Service Unavailable (time budget exhausted)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := openStore(t, "")
			tg := newTarget(t, tt.script...)
			putPolicy(t, st, "p", tt.policy)
			task := addTask(t, st, tg.URL+"/hook", "p")
			start(t, st, options{})

			got := waitFor(t, st, task.ID, terminal)
			most := max(tt.wantMost, tt.wantAttempts)
			if got.Status != tt.wantStatus || got.AttemptNumber < tt.wantAttempts || got.AttemptNumber > most {
				t.Fatalf("task = %s after %d attempts, want %s after %d to %d", got.Status, got.AttemptNumber, tt.wantStatus, tt.wantAttempts, most)
			}
			n := got.AttemptNumber
			if !strings.HasPrefix(got.LastError, tt.wantLastErr) {
				t.Fatalf("lastError = %q, want it to start with %q", got.LastError, tt.wantLastErr)
			}
			keys := tg.seen()
			if len(keys) != n {
				t.Fatalf("target saw %d requests, want %d", len(keys), n)
			}
			for _, k := range keys {
				if k != task.IdempotencyKey {
					t.Fatalf("Idempotency-Key %q, want %q on every attempt", k, task.IdempotencyKey)
				}
			}
			log := attempts(t, st, task.ID)
			if len(log) != n {
				t.Fatalf("attempt log has %d entries, want %d", len(log), n)
			}
			for i, a := range log {
				if a.AttemptNumber != i+1 || a.ResponseStatus != tt.script[min(i, len(tt.script)-1)] {
					t.Fatalf("attempt %d = #%d status %d", i, a.AttemptNumber, a.ResponseStatus)
				}
			}
		})
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	t.Parallel()
	st := openStore(t, "")
	tg := newTarget(t, 503, 200)
	tg.header.Set("Retry-After", "1")
	putPolicy(t, st, "p", fast(3))
	task := addTask(t, st, tg.URL, "p")
	start(t, st, options{})

	waitFor(t, st, task.ID, terminal)
	log := attempts(t, st, task.ID)
	if len(log) != 2 {
		t.Fatalf("%d attempts, want 2", len(log))
	}
	if gap := log[1].StartedAt.Sub(log[0].StartedAt); gap < time.Second {
		t.Fatalf("second attempt %v after the first, want at least the 1s Retry-After", gap)
	}
}

func TestDecorrelatedJitterStateIsStored(t *testing.T) {
	t.Parallel()
	st := openStore(t, "")
	tg := newTarget(t, 503, 503, 503, 200)
	putPolicy(t, st, "p", retry.Policy{MaxAttempts: 5, Backoff: backoff.Policy{
		Kind: backoff.Exponential, Base: 5 * time.Millisecond, Max: 50 * time.Millisecond, Jitter: backoff.DecorrelatedJitter,
	}})
	task := addTask(t, st, tg.URL, "p")
	start(t, st, options{})

	var prevs []time.Duration
	waitFor(t, st, task.ID, func(task *store.Task) bool {
		if len(prevs) == 0 || prevs[len(prevs)-1] != task.PrevDelay {
			prevs = append(prevs, task.PrevDelay)
		}
		return task.Status.Terminal()
	})
	got := waitFor(t, st, task.ID, terminal)
	if got.Status != store.Succeeded {
		t.Fatalf("status %s", got.Status)
	}
	// Each stored delay lies in [base, min(max, 3·previous)].
	last := 5 * time.Millisecond
	for _, d := range prevs {
		if d == 0 {
			continue
		}
		if d < 5*time.Millisecond || d > min(50*time.Millisecond, 3*last) {
			t.Fatalf("stored delays %v: %v outside [5ms, 3·%v]", prevs, d, last)
		}
		last = d
	}
	if got.PrevDelay == 0 {
		t.Fatalf("PrevDelay not stored")
	}
}

func TestWakeRunsANewTaskPromptly(t *testing.T) {
	t.Parallel()
	st := openStore(t, "")
	tg := newTarget(t, 200)
	putPolicy(t, st, "p", fast(3))
	s, _ := start(t, st, options{cfg: schedulerConfig(time.Hour)})
	time.Sleep(20 * time.Millisecond) // Run has rebuilt its (empty) heap

	task := addTask(t, st, tg.URL, "p")
	s.Wake(task.Due())
	got := waitFor(t, st, task.ID, terminal)
	if got.Status != store.Succeeded {
		t.Fatalf("status %s, want SUCCEEDED", got.Status)
	}
}

func TestResyncFindsTasksNobodyWoke(t *testing.T) {
	t.Parallel()
	st := openStore(t, "")
	tg := newTarget(t, 200)
	putPolicy(t, st, "p", fast(3))
	start(t, st, options{cfg: schedulerConfig(50 * time.Millisecond)})
	time.Sleep(20 * time.Millisecond)

	task := addTask(t, st, tg.URL, "p") // no Wake
	if got := waitFor(t, st, task.ID, terminal); got.Status != store.Succeeded {
		t.Fatalf("status %s, want SUCCEEDED", got.Status)
	}
}

func TestManyTasksAllFinish(t *testing.T) {
	t.Parallel()
	st := openStore(t, "")
	tg := newTarget(t, 503, 200)
	putPolicy(t, st, "p", retry.Policy{MaxAttempts: 1000, Backoff: backoffFixed(0)})
	var ids []string
	for range 200 {
		ids = append(ids, addTask(t, st, tg.URL, "p").ID)
	}
	start(t, st, options{cfg: schedulerConfig(time.Hour)})
	for _, id := range ids {
		if got := waitFor(t, st, id, terminal); got.Status != store.Succeeded {
			t.Fatalf("task %s: %s", id, got.Status)
		}
	}
	if n := len(tg.seen()); n != 201 {
		t.Fatalf("target saw %d requests, want 201 (one failure, then one success each)", n)
	}
	counts, err := st.TaskCounts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := counts[store.Succeeded]; got != 200 {
		t.Fatalf("SUCCEEDED count %d, want 200 (%v)", got, counts)
	}
}

// A task is claimed ahead of its due time, but never sent before it.
func TestNoAttemptBeforeItsDueTime(t *testing.T) {
	t.Parallel()
	st := openStore(t, "")
	tg := newTarget(t, 200)
	putPolicy(t, st, "p", fast(3))
	s, _ := start(t, st, options{cfg: scheduler.Config{ClaimAhead: 200 * time.Millisecond, Resync: time.Hour}})

	var ids []string
	due := map[string]time.Time{}
	for i := range 5 {
		at := time.Now().Add(time.Duration(100+50*i) * time.Millisecond).Truncate(time.Millisecond)
		task, _, err := st.TaskCreate(context.Background(), &store.Task{Tenant: tenant, TargetURL: tg.URL, Method: "POST",
			PolicyID: "p", RequestHash: "h", NextAttemptAt: at})
		if err != nil {
			t.Fatal(err)
		}
		s.Wake(task.Due())
		ids = append(ids, task.ID)
		due[task.ID] = at
	}
	for _, id := range ids {
		waitFor(t, st, id, terminal)
		log := attempts(t, st, id)
		if len(log) != 1 {
			t.Fatalf("task %s: %d attempts, want 1", id, len(log))
		}
		if early := due[id].Sub(log[0].StartedAt); early > 0 {
			t.Fatalf("task %s sent %v before it was due", id, early)
		}
	}
}
