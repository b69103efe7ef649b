package run

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry/service/blob"
	"github.com/retrykit/retry/service/blob/disk"
	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/sqlite"
)

// syncBuffer is a log destination the sweeps and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// sweepEnv is an SQLite store and an embedded blob store in a temporary
// directory, closed when the test ends.
type sweepEnv struct {
	st    *sqlite.Store
	blobs *disk.Store
	dir   string
	logs  *syncBuffer
	log   *slog.Logger
}

func newSweepEnv(t *testing.T) *sweepEnv {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "retryd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	blobs, err := disk.Open(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { blobs.Close() })
	logs := &syncBuffer{}
	return &sweepEnv{st: st, blobs: blobs, dir: filepath.Join(dir, "blobs"), logs: logs,
		log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
}

func (e *sweepEnv) sweeper(blobs blob.Store, retention time.Duration, now time.Time) *sweeper {
	return &sweeper{st: e.st, blobs: blobs, retention: retention, log: e.log, now: func() time.Time { return now }}
}

// put stores body in the blob store and returns its reference.
func (e *sweepEnv) put(t *testing.T, body string) string {
	t.Helper()
	b, err := e.blobs.Put(context.Background(), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return b.Ref
}

// age makes the blob ref look put at when.
func (e *sweepEnv) age(t *testing.T, ref string, when time.Time) {
	t.Helper()
	hex := strings.TrimPrefix(ref, disk.RefPrefix)
	if err := os.Chtimes(filepath.Join(e.dir, "sha256", hex[:2], hex), when, when); err != nil {
		t.Fatal(err)
	}
}

// exists reports whether the blob ref is still there.
func (e *sweepEnv) exists(t *testing.T, ref string) bool {
	t.Helper()
	r, _, err := e.blobs.Open(context.Background(), ref)
	if errors.Is(err, blob.ErrNotFound) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	return true
}

// task creates a task holding ref ("" for an inline body) and, unless
// status is live, ends it as status at when.
func (e *sweepEnv) task(t *testing.T, key, ref string, status store.Status, when time.Time) *store.Task {
	t.Helper()
	ctx := context.Background()
	in := &store.Task{Tenant: "t", IdempotencyKey: key, TargetURL: "http://127.0.0.1:9/", Method: "POST",
		PolicyID: "p", CreatedAt: when, NextAttemptAt: when}
	if ref != "" {
		in.BodyRef, in.BodySize = ref, 3
	} else {
		in.Body = []byte("inline")
	}
	tk, _, err := e.st.TaskCreate(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if status == store.Pending {
		return tk
	}
	c, err := e.st.TaskClaim(ctx, store.ClaimParams{Now: when, Lease: time.Minute, IDs: []string{tk.ID}})
	if err != nil || len(c) != 1 {
		t.Fatalf("claim %s = %v, %v", key, c, err)
	}
	errs, err := e.st.TaskFinish(ctx, []store.Finish{{TaskID: tk.ID, Version: c[0].Version, Status: status, Now: when,
		Attempt: store.Attempt{AttemptNumber: 1, StartedAt: when}}})
	if err != nil || errs[0] != nil {
		t.Fatalf("finish %s = %v, %v", key, errs, err)
	}
	return tk
}

func TestPurgeSweep(t *testing.T) {
	t.Parallel()
	e := newSweepEnv(t)
	ctx := context.Background()
	now := time.Now()
	old, young := now.Add(-48*time.Hour), now.Add(-time.Hour)
	shared, liveToo, alone, youngRef := e.put(t, "shared"), e.put(t, "live too"), e.put(t, "alone"), e.put(t, "young")
	callers := "s3://bucket/callers-own"
	purged := []*store.Task{
		e.task(t, "shared-1", shared, store.Succeeded, old),
		e.task(t, "shared-2", shared, store.Exhausted, old),
		e.task(t, "live-too", liveToo, store.Failed, old),
		e.task(t, "alone", alone, store.Succeeded, old),
		e.task(t, "callers", callers, store.Succeeded, old),
		e.task(t, "inline", "", store.Failed, old),
	}
	kept := []*store.Task{
		e.task(t, "live", liveToo, store.Pending, now),
		e.task(t, "young", youngRef, store.Succeeded, young),
	}

	e.sweeper(e.blobs, 24*time.Hour, now).purge(ctx)
	for _, tk := range purged {
		if _, err := e.st.TaskGet(ctx, "t", tk.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("task %s after the sweep: %v, want purged", tk.IdempotencyKey, err)
		}
	}
	for _, tk := range kept {
		if _, err := e.st.TaskGet(ctx, "t", tk.ID); err != nil {
			t.Errorf("task %s after the sweep: %v, want kept", tk.IdempotencyKey, err)
		}
	}
	for ref, want := range map[string]bool{shared: false, alone: false, liveToo: true, youngRef: true} {
		if got := e.exists(t, ref); got != want {
			t.Errorf("blob %s exists = %v, want %v", ref, got, want)
		}
	}
	if logs := e.logs.String(); !strings.Contains(logs, "tasks=6 blobs_deleted=2") {
		t.Errorf("the sweep logged:\n%s\nwant tasks=6 blobs_deleted=2", logs)
	}

	// Once the live task ends and ages, its blob goes too.
	c, err := e.st.TaskClaim(ctx, store.ClaimParams{Now: now, Lease: time.Minute, IDs: []string{kept[0].ID}})
	if err != nil || len(c) != 1 {
		t.Fatal(c, err)
	}
	if errs, err := e.st.TaskFinish(ctx, []store.Finish{{TaskID: c[0].ID, Version: c[0].Version,
		Status: store.Failed, Now: now}}); err != nil || errs[0] != nil {
		t.Fatal(errs, err)
	}
	e.sweeper(e.blobs, 24*time.Hour, now.Add(48*time.Hour)).purge(ctx)
	for _, ref := range []string{liveToo, youngRef} {
		if e.exists(t, ref) {
			t.Errorf("blob %s outlived its last task", ref)
		}
	}
}

func TestPurgeSweepWithoutBlobStore(t *testing.T) {
	t.Parallel()
	e := newSweepEnv(t)
	ctx := context.Background()
	now := time.Now()
	ref := e.put(t, "body")
	tk := e.task(t, "k", ref, store.Succeeded, now.Add(-time.Hour))
	e.sweeper(nil, time.Minute, now).purge(ctx)
	if _, err := e.st.TaskGet(ctx, "t", tk.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("task after the sweep: %v, want purged", err)
	}
	if !e.exists(t, ref) {
		t.Error("a sweep without a blob store deleted a blob")
	}
}

// TestPurgeSweepBatches: a backlog larger than a batch is purged batch
// after batch in one sweep.
func TestPurgeSweepBatches(t *testing.T) {
	t.Parallel()
	e := newSweepEnv(t)
	ctx := context.Background()
	old := time.Now().Add(-time.Hour)
	const n = sweepBatch + sweepBatch/2
	in := make([]*store.Task, n)
	for i := range in {
		in[i] = &store.Task{Tenant: "t", TargetURL: "http://127.0.0.1:9/", Method: "GET", CreatedAt: old, NextAttemptAt: old}
	}
	if _, err := e.st.TaskCreateBatch(ctx, in); err != nil {
		t.Fatal(err)
	}
	for done := 0; done < n; {
		c, err := e.st.TaskClaim(ctx, store.ClaimParams{Now: old, Lease: time.Minute, Limit: store.MaxClaimLimit})
		if err != nil || len(c) == 0 {
			t.Fatal(c, err)
		}
		fs := make([]store.Finish, len(c))
		for i, tk := range c {
			fs[i] = store.Finish{TaskID: tk.ID, Version: tk.Version, Status: store.Succeeded, Now: old}
		}
		if _, err := e.st.TaskFinish(ctx, fs); err != nil {
			t.Fatal(err)
		}
		done += len(c)
	}
	tasks, blobs, err := e.sweeper(e.blobs, time.Minute, time.Now()).purgeBefore(ctx, time.Now())
	if err != nil || tasks != n || blobs != 0 {
		t.Fatalf("purgeBefore = %d tasks, %d blobs, %v; want %d, 0", tasks, blobs, err, n)
	}
	if logs := e.logs.String(); strings.Count(logs, "batch purged") != 2 {
		t.Errorf("logged %d batches, want 2:\n%s", strings.Count(logs, "batch purged"), logs)
	}
	counts, err := e.st.TaskCounts(ctx)
	if err != nil || counts[store.Succeeded] != 0 {
		t.Errorf("TaskCounts = %v, %v; want none left", counts, err)
	}
}

func TestOrphanSweep(t *testing.T) {
	t.Parallel()
	e := newSweepEnv(t)
	ctx := context.Background()
	now := time.Now()
	held, heldByDead, orphan, fresh := e.put(t, "held"), e.put(t, "held by a dead letter"), e.put(t, "orphan"),
		e.put(t, "fresh")
	for _, ref := range []string{held, heldByDead, orphan} {
		e.age(t, ref, now.Add(-2*orphanGrace))
	}
	e.task(t, "live", held, store.Pending, now)
	e.task(t, "dead", heldByDead, store.Exhausted, now)

	e.sweeper(e.blobs, 0, now).orphans(ctx)
	for ref, want := range map[string]bool{held: true, heldByDead: true, orphan: false, fresh: true} {
		if got := e.exists(t, ref); got != want {
			t.Errorf("blob %s exists = %v, want %v", ref, got, want)
		}
	}
	if logs := e.logs.String(); !strings.Contains(logs, "deleted=1 blobs_listed=4") {
		t.Errorf("the sweep logged:\n%s\nwant deleted=1 blobs_listed=4", logs)
	}
}

// TestOrphanSweepBatches: more orphans than one BodyRefsInUse asks about.
func TestOrphanSweepBatches(t *testing.T) {
	t.Parallel()
	e := newSweepEnv(t)
	ctx := context.Background()
	const n = sweepBatch + 10
	var keep string
	for i := range n {
		ref := e.put(t, fmt.Sprint("orphan ", i))
		e.age(t, ref, time.Now().Add(-2*orphanGrace))
		if i == n-1 {
			keep = ref
		}
	}
	e.task(t, "k", keep, store.Pending, time.Now())
	listed, deleted, err := e.sweeper(e.blobs, 0, time.Now()).deleteOrphans(ctx, time.Now().Add(-orphanGrace))
	if err != nil || listed != n || deleted != n-1 {
		t.Fatalf("deleteOrphans = listed %d, deleted %d, %v; want %d, %d", listed, deleted, err, n, n-1)
	}
	if !e.exists(t, keep) {
		t.Error("the referenced blob was deleted")
	}
}

// failingBlobs fails Delete for one reference.
type failingBlobs struct {
	blob.Store
	bad string
}

func (f failingBlobs) Delete(ctx context.Context, ref string) error {
	if ref == f.bad {
		return errors.New("disk on fire")
	}
	return f.Store.Delete(ctx, ref)
}

// TestPurgeSweepBlobFailure: a blob that cannot be deleted is reported,
// and the others of the batch are deleted all the same. (Its task is
// gone: the orphan sweep deletes it later.)
func TestPurgeSweepBlobFailure(t *testing.T) {
	t.Parallel()
	e := newSweepEnv(t)
	ctx := context.Background()
	now := time.Now()
	bad, good := e.put(t, "bad"), e.put(t, "good")
	e.task(t, "bad", bad, store.Succeeded, now.Add(-time.Hour))
	e.task(t, "good", good, store.Succeeded, now.Add(-time.Hour))
	e.sweeper(failingBlobs{e.blobs, bad}, time.Minute, now).purge(ctx)
	if e.exists(t, good) || !e.exists(t, bad) {
		t.Errorf("after the sweep: good exists %v, bad exists %v; want false, true", e.exists(t, good), e.exists(t, bad))
	}
	if logs := e.logs.String(); !strings.Contains(logs, "disk on fire") || !strings.Contains(logs, "tasks_purged=2") {
		t.Errorf("the sweep logged:\n%s\nwant the failure and tasks_purged=2", logs)
	}
	e.age(t, bad, now.Add(-2*orphanGrace))
	e.sweeper(e.blobs, 0, now).orphans(ctx)
	if e.exists(t, bad) {
		t.Error("the orphan sweep left the blob whose deletion failed")
	}
}

func TestEvery(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	var runs atomic.Int64
	done := make(chan struct{})
	go func() {
		every(ctx, time.Millisecond, time.Millisecond, func(context.Context) {
			if runs.Add(1) == 3 {
				cancel()
			}
		})
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("every did not return once its context ended")
	}
	if got := runs.Load(); got != 3 {
		t.Errorf("ran %d times, want 3", got)
	}
	for range 100 {
		if d := jitter(time.Minute); d < 54*time.Second || d > 66*time.Second {
			t.Fatalf("jitter(1m) = %v", d)
		}
	}
}

// notPurger hides the Purger methods of a store.
type notPurger struct{ store.Store }

func TestStartSweeps(t *testing.T) {
	t.Parallel()
	e := newSweepEnv(t)
	ctx := context.Background()
	stop := startSweeps(ctx, e.st, e.blobs, DefaultRetention, e.log)
	stop() // returns at once: the first sweeps are minutes away
	startSweeps(ctx, e.st, nil, 0, e.log)()
	startSweeps(ctx, notPurger{e.st}, e.blobs, DefaultRetention, e.log)()
	logs := e.logs.String()
	if !strings.Contains(logs, "kept for ever") || !strings.Contains(logs, "cannot purge") {
		t.Errorf("logged:\n%s\nwant retention 0 and a store without Purger told", logs)
	}
}

func TestRetentionFlag(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, tt := range []struct {
		args []string
		env  map[string]string
		want time.Duration
	}{
		{nil, nil, 7 * 24 * time.Hour},
		{[]string{"--retention", "30d"}, nil, 30 * 24 * time.Hour},
		{[]string{"--retention", "36h"}, nil, 36 * time.Hour},
		{[]string{"--retention", "0"}, nil, 0},
		{[]string{"--retention=0d"}, nil, 0},
		{nil, map[string]string{"RETRYD_RETENTION": "2d"}, 48 * time.Hour},
		{[]string{"--retention", "1h"}, map[string]string{"RETRYD_RETENTION": "2d"}, time.Hour},
	} {
		c, err := ParseConfig(tt.args, env(tt.env), io.Discard)
		if err != nil || c.Retention != tt.want {
			t.Errorf("ParseConfig(%q, %v) = retention %v, %v; want %v", tt.args, tt.env, c.Retention, err, tt.want)
		}
	}
	for _, bad := range []string{"-1h", "-2d", "7x", "d", "1.5d", "99999999d"} {
		if _, err := ParseConfig([]string{"--retention", bad}, env(nil), io.Discard); err == nil {
			t.Errorf("ParseConfig(--retention %s) succeeded", bad)
		}
	}
	var usage bytes.Buffer
	ParseConfig([]string{"--help"}, env(nil), &usage)
	if !strings.Contains(usage.String(), "(default 7d)") {
		t.Errorf("usage does not show the default as 7d:\n%s", usage.String())
	}
}
