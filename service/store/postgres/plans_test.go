package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/postgres"
	"github.com/retrykit/retry/service/store/postgres/pgtest"
)

// The store's statements find their rows through indexes however small
// retry_tasks was when a connection first planned them: a store that
// started on an empty schema and then works through thousands of tasks
// reads no more of retry_tasks by sequential scans than one such scan
// would. (Generic plans made while the table was small used to keep a
// scan of the whole table in every claim, finish and create batch.)
func TestStatementsDoNotScanTasksAsTheTableGrows(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	s := open(t, schema)

	// Small table: each statement runs more than five times on the pool's
	// connections, so PostgreSQL settles on a generic plan.
	workThrough(t, s, "small", 20, 3)
	workThrough(t, s, "large", 3, 1000)
	workThrough(t, s, "after", 20, 3)
	s.Close() // its connections end, and PostgreSQL counts what they did

	var read int64
	// A scan of the grown table would show as thousands of rows at once.
	readStats(t, schema, func() bool { return read > 3100 }, `SELECT coalesce(seq_tup_read, 0) FROM pg_stat_user_tables
		WHERE schemaname = $1 AND relname = 'retry_tasks'`, &read)
	if read > 3100 {
		t.Fatalf("the store's statements read %d rows of retry_tasks by sequential scans (%d tasks in it)", read, 3000+120)
	}
}

// The statements that must scan a small table (the dead-instance check,
// the sums over the counts' rows) are not compiled by LLVM. enable_seqscan
// off makes a scan cost some 10^10, far above jit_above_cost, and each run
// of the dead-instance check, four times a second per instance, cost some
// 30 ms of JIT for 0.02 ms of work.
func TestScansAreNotJITCompiled(t *testing.T) {
	t.Parallel()
	s := open(t, newSchema(t))
	ctx := context.Background()
	for _, sql := range []string{
		`SELECT EXISTS (SELECT FROM retry_instances WHERE beat_at < now())`,
		`SELECT sum(pending)::bigint FROM retry_counts`,
	} {
		plan, err := postgres.ExplainAnalyze(ctx, s, sql)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(plan, `"Seq Scan"`) {
			t.Errorf("%s: plan %s, want a sequential scan (the case this test is about)", sql, plan)
		}
		if strings.Contains(plan, `"JIT"`) {
			t.Errorf("%s: JIT compiled: %s", sql, plan)
		}
	}
}

// The store's statements are planned once per connection, not at each run:
// PostgreSQL, left to choose, kept making custom plans for the create,
// claim and finish batches (their parameter arrays make a custom plan look
// cheaper), about a tenth of its CPU per task.
func TestStatementsArePlannedOnce(t *testing.T) {
	t.Parallel()
	s := open(t, newSchema(t))
	ctx := context.Background()
	workThrough(t, s, "round", 12, 2) // more than the five runs after which PostgreSQL chooses
	generic, custom, err := postgres.PlansMade(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if custom != 0 || generic == 0 {
		t.Errorf("the pool's statements made %d custom plans and %d generic ones; want none custom", custom, generic)
	}
}

// workThrough has s create batches of size tasks (and a repeat of one, so
// that the lookup of taken keys runs too), claim them and record their
// success, batch after batch: every statement of a task's life, batches
// times.
func workThrough(t *testing.T, s *postgres.Store, prefix string, batches, size int) {
	t.Helper()
	ctx := context.Background()
	for b := range batches {
		in := make([]*store.Task, size)
		for i := range in {
			in[i] = newTask(fmt.Sprintf("%s-%d-%d", prefix, b, i), t0)
		}
		in = append(in, newTask(fmt.Sprintf("%s-%d-0", prefix, b), t0)) // a repeat: the lookup runs too
		res, err := s.TaskCreateBatch(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]string, 0, size)
		for _, r := range res[:size] {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			ids = append(ids, r.Task.ID)
		}
		got, err := s.TaskClaim(ctx, store.ClaimParams{Now: t0, Lease: time.Minute, IDs: ids, Later: func(store.Due) {}})
		if err != nil || len(got) != size {
			t.Fatalf("TaskClaim = %d tasks, %v; want %d", len(got), err, size)
		}
		fs := make([]store.Finish, len(got))
		for i, c := range got {
			fs[i] = store.Finish{TaskID: c.ID, Version: c.Version, Status: store.Succeeded, Now: t0,
				Attempt: store.Attempt{AttemptNumber: 1, StartedAt: t0, ResponseStatus: 200}}
		}
		errs, err := s.TaskFinish(ctx, fs)
		if err == nil {
			err = errors.Join(errs...)
		}
		if err != nil {
			t.Fatalf("TaskFinish = %v, %v", errs, err)
		}
	}
}

// A task's statements read index entries for the tasks they take or name,
// not for a backlog of 2,000 due tasks, whatever statistics they were
// planned with: claims by ID, of due and of not-due IDs (with the lookup of
// when those are due), claims of whatever is due, finishes (retries and
// ends), creates repeated alone and in batches, reads and cancels. (The
// claim by IDs as one join kept the generic plan made while the table was
// small, which read every entry of retry_runs_wake up to Now at each claim,
// the backlog's and those of rows updated since the last vacuum; looked up
// per ID, the planner still chose that index for the due condition on a
// small analyzed table; the lookup of unclaimed IDs read every live task
// through retry_tasks_state when planned on an empty table; a generic plan
// of the claim without IDs joined a tenth of the due rows to the tasks by
// scanning them; a finish scanned retry_runs_pkey, and retry_tasks_pkey for
// the ends, once for each finish.)
func TestTaskLifeDoesNotReadTheBacklog(t *testing.T) {
	t.Parallel()
	// Each connection makes its generic plan at a statement's first run:
	// on a table of so many tasks, analyzed or not.
	for _, c := range []struct {
		name     string
		tasks    int
		analyzed bool
	}{
		{"planned on an empty table", 0, false},
		{"planned on 20 analyzed tasks", 20, true},
		{"planned on 100 analyzed tasks", 100, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			workAfter(t, c.tasks, c.analyzed)
		})
	}
}

func workAfter(t *testing.T, tasks int, analyzed bool) {
	schema := newSchema(t)
	s := open(t, schema)
	ctx := context.Background()
	const backlog, each = 2000, 20
	create := func(prefix string, n int, due time.Time) []string {
		t.Helper()
		in := make([]*store.Task, n)
		for i := range in {
			in[i] = newTask(fmt.Sprintf("%s-%d", prefix, i), due)
		}
		res, err := s.TaskCreateBatch(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]string, min(n, each))
		for i := range ids {
			if res[i].Err != nil {
				t.Fatal(res[i].Err)
			}
			ids[i] = res[i].Task.ID
		}
		return ids
	}
	// claimEach claims each of ids alone at now, wanting want tasks each;
	// those not claimed are looked up (Later).
	claimEach := func(ids []string, now time.Time, want int) []*store.Task {
		t.Helper()
		var claimed []*store.Task
		for _, id := range ids {
			got, err := s.TaskClaim(ctx, store.ClaimParams{Now: now, Lease: time.Minute, IDs: []string{id}, Later: func(store.Due) {}})
			if err != nil || len(got) != want {
				t.Fatalf("TaskClaim(%s at %v) = %d tasks, %v; want %d", id, now, len(got), err, want)
			}
			claimed = append(claimed, got...)
		}
		return claimed
	}
	// finishEach records an outcome for each of tasks alone, a retry for
	// every other one: both ways a finish updates the tables.
	finishEach := func(tasks []*store.Task, now time.Time) {
		t.Helper()
		for i, c := range tasks {
			f := store.Finish{TaskID: c.ID, Version: c.Version, Status: store.Succeeded, Now: now,
				Attempt: store.Attempt{AttemptNumber: 1, StartedAt: now, ResponseStatus: 200}}
			if i%2 == 0 {
				f.Status, f.NextAttemptAt, f.Attempt.ResponseStatus = store.Pending, now.Add(time.Hour), 503
			}
			errs, err := s.TaskFinish(ctx, []store.Finish{f})
			if err == nil {
				err = errors.Join(errs...)
			}
			if err != nil {
				t.Fatalf("TaskFinish(%s) = %v", c.ID, err)
			}
		}
	}
	// createAgain creates a task, reads it, and cancels it; on analyzed
	// tables, it also creates it again, alone and in a batch (the lookups
	// of a taken key run). On a table never analyzed, PostgreSQL has no
	// statistics to tell the key's index from the other indexes on tenant,
	// and takes the newest of those (retry_tasks_tenant_host); its first
	// autoanalyze, once 50 rows have changed, replans the lookup.
	createAgain := func(key string) {
		t.Helper()
		made := mustCreate(t, s, newTask(key, t0.Add(time.Hour)))
		if analyzed {
			again, created, err := s.TaskCreate(ctx, newTask(key, t0.Add(time.Hour)))
			if err != nil || created || again.ID != made.ID {
				t.Fatalf("TaskCreate(%s again) = %v, %v, %v; want the task made", key, again, created, err)
			}
			res, err := s.TaskCreateBatch(ctx, []*store.Task{newTask(key, t0.Add(time.Hour)), newTask(key+"-next", t0.Add(time.Hour))})
			if err != nil || res[0].Created || res[0].Task == nil || res[0].Task.ID != made.ID || !res[1].Created {
				t.Fatalf("TaskCreateBatch(%s again, and a new one) = %+v, %v; want the task made, then one created", key, res, err)
			}
		}
		if got, err := s.TaskGet(ctx, made.Tenant, made.ID); err != nil || got.ID != made.ID {
			t.Fatalf("TaskGet(%s) = %v, %v", made.ID, got, err)
		}
		if _, err := s.TaskTransition(ctx, store.Transition{Tenant: made.Tenant, TaskID: made.ID,
			From: []store.Status{store.Pending}, To: store.Cancelled, Now: t0}); err != nil {
			t.Fatalf("TaskTransition(%s to CANCELLED) = %v", made.ID, err)
		}
	}
	first := create("first", tasks, t0)
	if analyzed {
		admin := pgtest.Admin(t)
		if _, err := admin.Exec(ctx, fmt.Sprintf(`ANALYZE %q.retry_tasks, %q.retry_runs`, schema, schema)); err != nil {
			t.Fatal(err)
		}
		admin.Close(ctx)
	}
	if len(first) == 0 {
		claimEach([]string{store.NewID()}, t0, 0) // no such task
		errs, err := s.TaskFinish(ctx, []store.Finish{{TaskID: store.NewID(), Version: 1, Status: store.Succeeded, Now: t0}})
		if err != nil || !errors.Is(errs[0], store.ErrNotFound) {
			t.Fatalf("TaskFinish(no such task) = %v, %v; want ErrNotFound", errs, err)
		}
	}
	finishEach(claimEach(first, t0, 1), t0)
	createAgain("before")
	due := create("backlog", backlog, t0.Add(time.Second))
	for i := range each {
		createAgain(fmt.Sprint("after-", i))
	}
	claimed := claimEach(due, t0.Add(time.Second), 1)
	claimEach(due, t0.Add(2*time.Second), 0) // in flight now, their leases running: not due
	finishEach(claimed, t0.Add(2*time.Second))
	for range each {
		got, err := s.TaskClaim(ctx, store.ClaimParams{Now: t0.Add(time.Second), Lease: time.Minute, Limit: 1})
		if err != nil || len(got) != 1 {
			t.Fatalf("TaskClaim(the next due) = %d tasks, %v; want 1", len(got), err)
		}
	}
	s.Close() // its connections end, and PostgreSQL counts what they did

	// Each claim that took its task and each finish updated a row of
	// retry_runs: once those counts are in, the connections' index counts
	// are too.
	took := int64(2*len(first) + 2*len(claimed) + each)
	var read, updated int64
	var indexes string
	readStats(t, schema, func() bool { return updated >= took }, `SELECT
			(SELECT coalesce(sum(idx_tup_read), 0)::bigint FROM pg_stat_user_indexes WHERE schemaname = $1),
			(SELECT coalesce(string_agg(indexrelname || ' ' || idx_tup_read, ', ' ORDER BY indexrelname), '')
				FROM pg_stat_user_indexes WHERE schemaname = $1 AND idx_tup_read > 0),
			(SELECT coalesce(n_tup_upd, 0) FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'retry_runs')`,
		&read, &indexes, &updated)
	if updated < took {
		t.Fatalf("retry_runs counts %d updates, want at least %d (one a claim that took its task, one a finish)", updated, took)
	}
	t.Logf("the statements of %d claims and finishes, and the rest, read %d index entries: %s", took, read, indexes)
	// Some 10 entries a claim or finish (its rows, their counts) are read;
	// a backlog's would be 2,000 at once.
	if read >= backlog {
		t.Fatalf("the statements of %d claims and finishes, and the rest, read %d index entries (%s), a backlog of %d due",
			took, read, indexes, backlog)
	}
}

// readStats scans query ($1 the schema), over PostgreSQL's statistics, into
// dest until arrived says the counts of the store's ended connections are
// in, or for 3 s: the backends flush them when they end.
func readStats(t *testing.T, schema string, arrived func() bool, query string, dest ...any) {
	t.Helper()
	ctx := context.Background()
	conn := pgtest.Admin(t)
	defer conn.Close(ctx)
	for deadline := time.Now().Add(3 * time.Second); ; {
		if err := conn.QueryRow(ctx, query, schema).Scan(dest...); err != nil {
			t.Fatal(err)
		}
		if arrived() || time.Now().After(deadline) {
			return
		}
		time.Sleep(200 * time.Millisecond)
		_, _ = conn.Exec(ctx, "SELECT pg_stat_clear_snapshot()")
	}
}
