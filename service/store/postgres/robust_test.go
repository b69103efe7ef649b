package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/postgres/pgtest"
)

// Targets answer with any bytes; PostgreSQL's text cannot hold NUL or
// invalid UTF-8, so the store keeps such strings as bytea, unchanged.
func TestKeepsAnyBytes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, newSchema(t))
	odd := "nul\x00 byte, bad utf-8 \xff\xfe, ünïcode ✓"
	tk := mustCreate(t, s, newTask("k1", t0))
	c, err := s.TaskClaim(ctx, store.ClaimParams{Now: t0, Lease: time.Minute, Limit: 1})
	if err != nil || len(c) != 1 {
		t.Fatalf("TaskClaim = %d, %v", len(c), err)
	}
	errs, err := s.TaskFinish(ctx, []store.Finish{{TaskID: tk.ID, Version: c[0].Version, Status: store.Failed, Now: t0,
		LastError: odd, LastStatus: 400, Attempt: store.Attempt{AttemptNumber: 1, StartedAt: t0, ResponseStatus: 400,
			ErrorMessage: odd, ResponseBody: odd}}})
	if err != nil || errs[0] != nil {
		t.Fatalf("TaskFinish = %v, %v", errs, err)
	}
	got, err := s.TaskGet(ctx, "acme", tk.ID)
	if err != nil || got.LastError != odd {
		t.Errorf("LastError = %q, %v; want %q", got.LastError, err, odd)
	}
	log, _, err := s.AttemptList(ctx, "acme", tk.ID, store.Page{})
	if err != nil || len(log) != 1 || log[0].ErrorMessage != odd || log[0].ResponseBody != odd {
		t.Errorf("attempt log = %+v, %v; want the message and body %q", log, err, odd)
	}
}

// Identifiers are text: one that cannot be stored is refused on writes and
// names nothing on reads, without an error from the server.
func TestUnstorableIdentifiers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, newSchema(t))
	bad := "a\x00b"
	for name, in := range map[string]*store.Task{
		"key":    newTask(bad, t0),
		"tenant": {Tenant: "bad\xff", TargetURL: "http://127.0.0.1:9/", Method: "GET"},
		"url":    {Tenant: "acme", TargetURL: "http://127.0.0.1:9/\x00", Method: "GET"},
	} {
		if _, _, err := s.TaskCreate(ctx, in); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("TaskCreate(%s with NUL or bad UTF-8) = %v, want ErrInvalid", name, err)
		}
	}
	if _, _, err := s.PolicyPut(ctx, &store.Policy{Tenant: "acme", ID: bad}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("PolicyPut(bad id) = %v, want ErrInvalid", err)
	}
	if _, err := s.TaskGet(ctx, "acme", bad); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("TaskGet(bad id) = %v, want ErrNotFound", err)
	}
	if _, err := s.PolicyGet(ctx, bad, "p"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("PolicyGet(bad tenant) = %v, want ErrNotFound", err)
	}
	if _, _, err := s.AttemptList(ctx, "acme", bad, store.Page{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("AttemptList(bad id) = %v, want ErrNotFound", err)
	}
	if items, _, err := s.TaskList(ctx, store.TaskFilter{Tenant: bad}, store.Page{}); err != nil || len(items) != 0 {
		t.Errorf("TaskList(bad tenant) = %d items, %v; want none", len(items), err)
	}
	tk := mustCreate(t, s, newTask("k1", t0))
	c, err := s.TaskClaim(ctx, store.ClaimParams{Now: t0, Lease: time.Minute, IDs: []string{bad, tk.ID}})
	if err != nil || len(c) != 1 || c[0].ID != tk.ID {
		t.Fatalf("TaskClaim(a bad id and a good one) = %d tasks, %v; want the good one", len(c), err)
	}
	errs, err := s.TaskFinish(ctx, []store.Finish{{TaskID: bad, Version: 1, Status: store.Succeeded, Now: t0},
		{TaskID: tk.ID, Version: c[0].Version, Status: store.Succeeded, Now: t0}})
	if err != nil || !errors.Is(errs[0], store.ErrNotFound) || errs[1] != nil {
		t.Errorf("TaskFinish(bad id, good id) = %v, %v; want ErrNotFound and nil", errs, err)
	}
}

// The counts, spread over rows written by many connections, always add up
// to the tasks there are, whatever mix of writes two stores make at once.
func TestCountsStayExact(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := newSchema(t)
	a, b := open(t, schema), open(t, schema)
	tenants := []string{"acme", "beta", "gamma"}
	var wg sync.WaitGroup
	for w, s := range []store.Store{a, b, a, b} {
		wg.Go(func() {
			now := t0
			for i := range 30 {
				in := newTask(fmt.Sprintf("w%d-%d", w, i), now)
				in.Tenant = tenants[(w+i)%len(tenants)] // so that claims and finishes mix tenants
				tk := mustCreate(t, s, in)
				if i%5 == 0 {
					if _, err := s.TaskTransition(ctx, store.Transition{Tenant: tk.Tenant, TaskID: tk.ID,
						From: []store.Status{store.Pending}, To: store.Cancelled, Now: now}); err != nil && !errors.Is(err, store.ErrConflict) {
						t.Errorf("cancel = %v", err)
					}
				}
				c, err := s.TaskClaim(ctx, store.ClaimParams{Now: now, Lease: time.Minute, Limit: 3})
				if err != nil {
					t.Errorf("TaskClaim = %v", err)
					return
				}
				var fs []store.Finish
				for k, ct := range c {
					st := []store.Status{store.Succeeded, store.Pending, store.Exhausted, store.Failed}[(i+k)%4]
					fs = append(fs, store.Finish{TaskID: ct.ID, Version: ct.Version, Status: st, Now: now, NextAttemptAt: now,
						Attempt: store.Attempt{AttemptNumber: ct.AttemptNumber, StartedAt: now}})
				}
				if _, err := s.TaskFinish(ctx, fs); err != nil {
					t.Errorf("TaskFinish = %v", err)
				}
				now = now.Add(time.Second)
			}
		})
	}
	wg.Wait()
	got, err := a.TaskCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conn := pgtest.Admin(t)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT status, count(*) FROM `+schema+`.retry_runs GROUP BY status`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[store.Status]int64{}
	for rows.Next() {
		var st store.Status
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			t.Fatal(err)
		}
		want[st] = n
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	var total int64
	for _, st := range []store.Status{store.Pending, store.InFlight, store.Succeeded, store.Exhausted, store.Failed, store.Cancelled} {
		total += got[st]
		if got[st] != want[st] {
			t.Errorf("TaskCounts()[%s] = %d, the table holds %d", st, got[st], want[st])
		}
	}
	if total != 4*30 {
		t.Errorf("counts add up to %d, want %d tasks", total, 4*30)
	}
	// So do each tenant's, spread over the shards of both stores'
	// connections.
	rows, err = conn.Query(ctx, `SELECT t.tenant, r.status, count(*) FROM `+schema+`.retry_runs r
		JOIN `+schema+`.retry_tasks t ON t.seq = r.task_seq GROUP BY t.tenant, r.status`)
	if err != nil {
		t.Fatal(err)
	}
	wantOf := map[string]map[store.Status]int64{}
	for rows.Next() {
		var tn string
		var st store.Status
		var n int64
		if err := rows.Scan(&tn, &st, &n); err != nil {
			t.Fatal(err)
		}
		if wantOf[tn] == nil {
			wantOf[tn] = map[store.Status]int64{}
		}
		wantOf[tn][st] = n
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	for _, tn := range tenants {
		got, err := b.TenantCounts(ctx, tn)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range []store.Status{store.Pending, store.InFlight, store.Succeeded, store.Exhausted, store.Failed,
			store.Cancelled} {
			if got[st] != wantOf[tn][st] {
				t.Errorf("TenantCounts(%s)[%s] = %d, the tables hold %d", tn, st, got[st], wantOf[tn][st])
			}
		}
	}
}
