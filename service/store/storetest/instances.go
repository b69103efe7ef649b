package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

// instancesOf returns a and b as store.Instances, skipping the test for a
// store without them.
func instancesOf(t *testing.T, a, b store.Store) (store.Instances, store.Instances) {
	t.Helper()
	ia, okA := a.(store.Instances)
	ib, okB := b.(store.Instances)
	if !okA || !okB {
		t.Skipf("%T is not a store.Instances", a)
	}
	if _, ok := a.(store.SendHorizon); !ok {
		t.Fatalf("%T is a store.Instances but not a store.SendHorizon", a)
	}
	return ia, ib
}

// testDeadInstance: an instance stops beating with two leases, one of a
// task it sent (within its send horizon) and one of a task claimed ahead
// and never sent. Another instance takes both back once the beat is old:
// the unsent one PENDING again, uncharged, the sent one claimable at once,
// its lost attempt charged; the dead instance can record neither.
func testDeadInstance(t *testing.T, a, b store.Store) {
	ia, ib := instancesOf(t, a, b)
	ctx := context.Background()
	idA, err := ia.Join(ctx, t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ib.Join(ctx, t0); err != nil {
		t.Fatal(err)
	}
	sentTask := create(t, a, newTask(tenant, "sent"))
	later := newTask(tenant, "unsent")
	later.NextAttemptAt = t0.Add(40 * time.Millisecond)
	unsentTask := create(t, a, later)
	// Claimed ahead, as a scheduler does: up to 50ms past now.
	got := claim(t, a, t0.Add(50*time.Millisecond), 10)
	if len(got) != 2 {
		t.Fatalf("claim = %v, want both tasks", ids(got))
	}
	for _, c := range got {
		if c.Holder != idA {
			t.Errorf("claimed task %s names holder %q, want the instance %q", c.ID, c.Holder, idA)
		}
	}
	sent, unsent := got[0], got[1]
	if sent.ID != sentTask.ID {
		sent, unsent = unsent, sent
	}
	if err := a.(store.SendHorizon).MaySend(ctx, sent); err != nil {
		t.Fatalf("MaySend = %v", err)
	}

	// A beat two seconds old is alive at a three-second threshold.
	if due, err := ib.ReclaimDead(ctx, t0.Add(2*time.Second), 3*time.Second); err != nil || len(due) != 0 {
		t.Fatalf("ReclaimDead of a live instance = %v, %v; want nothing", due, err)
	}
	at := t0.Add(4 * time.Second)
	if err := ib.Beat(ctx, at, time.Minute); err != nil {
		t.Fatal(err)
	}
	due, err := ib.ReclaimDead(ctx, at, 3*time.Second)
	if err != nil || len(due) != 2 {
		t.Fatalf("ReclaimDead = %v, %v; want both tasks", due, err)
	}
	for _, d := range due {
		want := at
		if d.ID == unsentTask.ID {
			want = unsentTask.NextAttemptAt
		}
		if !d.At.Equal(want) {
			t.Errorf("ReclaimDead reports %s due at %v, want %v", d.ID, d.At, want)
		}
	}
	u := get(t, b, tenant, unsentTask.ID)
	if u.Status != store.Pending || u.AttemptNumber != 0 || u.LastError != "" || !u.NextAttemptAt.Equal(unsentTask.NextAttemptAt) {
		t.Errorf("unsent task = %s #%d %q due %v; want PENDING #0, no error, due %v", u.Status, u.AttemptNumber,
			u.LastError, u.NextAttemptAt, unsentTask.NextAttemptAt)
	}
	again := claim(t, b, at, 10)
	if len(again) != 2 {
		t.Fatalf("claim after the reclaim = %v, want both tasks", ids(again))
	}
	for _, c := range again {
		want, wantErr := 1, ""
		if c.ID == sent.ID {
			want, wantErr = 2, store.LeaseExpiredMessage
		}
		if c.AttemptNumber != want || c.LastError != wantErr {
			t.Errorf("task %s claimed again as attempt %d, %q; want %d, %q", c.ID, c.AttemptNumber, c.LastError, want, wantErr)
		}
	}
	if n := len(attempts(t, b, tenant, sent.ID)); n != 1 {
		t.Errorf("the sent task's log has %d attempts, want the lost one", n)
	}
	if n := len(attempts(t, b, tenant, unsent.ID)); n != 0 {
		t.Errorf("the unsent task's log has %d attempts, want none", n)
	}
	// Fencing: the dead instance records nothing, and sends nothing more.
	errs, err := a.TaskFinish(ctx, []store.Finish{finishOf(sent, store.Succeeded, at), finishOf(unsent, store.Succeeded, at)})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs {
		wantErr(t, "the dead instance's finish "+string(rune('1'+i)), e, store.ErrLeaseLost)
	}
	// Not knowing it yet, it claims a task as idA (a claim does not ask).
	// MaySend refuses that attempt and joins again at once, as a new
	// instance, so that the task, handed back uncharged, goes with the
	// next claim, not after attempts refused until the next beat.
	// (Due beyond its send horizon: within it, MaySend asks nothing.)
	lateTask := newTask(tenant, "late")
	lateTask.NextAttemptAt = at
	late := create(t, a, lateTask)
	lc := claimOne(t, a, at, late.ID)
	if lc.Holder != idA {
		t.Errorf("the dead instance's claim names %q, want %q", lc.Holder, idA)
	}
	wantErr(t, "the dead instance's MaySend", a.(store.SendHorizon).MaySend(ctx, lc), store.ErrLeaseLost)
	back := store.Finish{TaskID: lc.ID, Version: lc.Version, Status: store.Pending, Held: true, NextAttemptAt: at, Now: at}
	if errs, err := a.TaskFinish(ctx, []store.Finish{back}); err != nil || errs[0] != nil {
		t.Fatalf("handing back the refused claim = %v, %v", errs, err)
	}
	c := claimOne(t, a, at, late.ID)
	if c.Holder == "" || c.Holder == idA || c.AttemptNumber != 1 {
		t.Errorf("the claim after joining again names %q as attempt %d, want a new instance's attempt 1", c.Holder, c.AttemptNumber)
	}
	if err := a.(store.SendHorizon).MaySend(ctx, c); err != nil {
		t.Errorf("MaySend after joining again = %v, want nil", err)
	}
	if err := ia.Beat(ctx, at, time.Minute); err != nil {
		t.Errorf("the beat of the instance joined again = %v, want nil", err)
	}
	counts, err := b.TenantCounts(ctx, tenant)
	if err != nil {
		t.Fatal(err)
	}
	checkCounts(t, "TenantCounts", counts, map[store.Status]int64{store.InFlight: 3})
}

// testBeatKeepsLeases: while its instance beats, a lease outlasts its
// length (up to twice), so a long attempt is not taken over; a lease is
// not extended further, so one its instance forgot (a claim whose answer
// was lost) still runs out.
func testBeatKeepsLeases(t *testing.T, a, b store.Store) {
	ia, _ := instancesOf(t, a, b)
	ctx := context.Background()
	if _, err := ia.Join(ctx, t0); err != nil {
		t.Fatal(err)
	}
	tk := create(t, a, newTask(tenant, "long"))
	c := claimOne(t, a, t0, tk.ID) // a 30 s lease
	const lease = 30 * time.Second
	for _, s := range []time.Duration{10, 20, 30, 40} {
		at := t0.Add(s * time.Second)
		if err := ia.Beat(ctx, at, lease); err != nil {
			t.Fatalf("Beat = %v", err)
		}
		if got := claim(t, b, at.Add(time.Second), 10); len(got) != 0 {
			t.Fatalf("%v after the claim, another store claimed %v from a beating instance", at.Add(time.Second).Sub(t0), ids(got))
		}
	}
	// Extended at 20 s to 50 s, not at 40 s: the claim was a lease ago.
	if got := claim(t, b, t0.Add(51*time.Second), 10); len(got) != 1 || got[0].AttemptNumber != 2 {
		g := get(t, b, tenant, tk.ID)
		t.Fatalf("claim at 51 s = %v, want the task at attempt 2 (it is %s, its lease until %v)", ids(got), g.Status, g.LeaseUntil.Sub(t0))
	}
	errs, err := a.TaskFinish(ctx, []store.Finish{finishOf(c, store.Succeeded, t0.Add(52*time.Second))})
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, "the old holder's finish", errs[0], store.ErrLeaseLost)
	if err := ia.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	tk = create(t, a, newTask(tenant, "after leaving"))
	if c := claimOne(t, a, t0, tk.ID); c.Holder != "" {
		t.Errorf("a claim after Leave names %q, want no holder", c.Holder)
	}
}

// testInstancesAlive: a store.Fleet counts the instances whose last beat
// (or join) is recent, until they leave.
func testInstancesAlive(t *testing.T, a, b store.Store) {
	ia, ib := instancesOf(t, a, b)
	fa, ok := a.(store.Fleet)
	if !ok {
		t.Fatalf("%T is a store.Instances but not a store.Fleet", a)
	}
	ctx := context.Background()
	alive := func(now time.Time, want int) {
		t.Helper()
		if n, err := fa.InstancesAlive(ctx, now, 2*time.Second); err != nil || n != want {
			t.Errorf("InstancesAlive at t0+%v = %d, %v; want %d", now.Sub(t0), n, err, want)
		}
	}
	alive(t0, 0)
	if _, err := ia.Join(ctx, t0); err != nil {
		t.Fatal(err)
	}
	alive(t0, 1)
	if _, err := ib.Join(ctx, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	alive(t0.Add(time.Second), 2)
	alive(t0.Add(2500*time.Millisecond), 1) // a's join is too old now
	if err := ia.Beat(ctx, t0.Add(2900*time.Millisecond), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	alive(t0.Add(2900*time.Millisecond), 2)
	if err := ib.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	alive(t0.Add(2900*time.Millisecond), 1)
}
