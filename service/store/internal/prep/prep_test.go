package prep_test

import (
	"errors"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/prep"
)

var t0 = time.Date(2031, 5, 6, 7, 8, 9, 123_456_789, time.FixedZone("x", 3600))

func TestPolicy(t *testing.T) {
	in := &store.Policy{Tenant: "t", ID: "p", CreatedAt: t0}
	p, err := prep.Policy(in)
	if err != nil || p == in || p.Spec == nil || !p.CreatedAt.Equal(t0.Truncate(time.Millisecond)) || p.CreatedAt.Location() != time.UTC {
		t.Errorf("Policy(%v) = %+v, %v; want a copy with an empty spec, created at the ms in UTC", in, p, err)
	}
	in.Spec = []byte("{}")
	if p, _ := prep.Policy(in); &p.Spec[0] == &in.Spec[0] {
		t.Error("Policy shares the spec's bytes")
	}
	before := time.Now().Add(-time.Millisecond)
	if p, _ := prep.Policy(&store.Policy{Tenant: "t", ID: "p"}); p.CreatedAt.Before(before) {
		t.Errorf("CreatedAt of a zero time = %v, want now", p.CreatedAt)
	}
	for _, in := range []*store.Policy{{Tenant: "t"}, {ID: "p"}} {
		if _, err := prep.Policy(in); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Policy(%+v) = %v, want ErrInvalid", in, err)
		}
	}
}

func TestFinish(t *testing.T) {
	for _, s := range []store.Status{store.Succeeded, store.Pending, store.Exhausted, store.Failed} {
		if err := prep.Finish(&store.Finish{Status: s}); err != nil {
			t.Errorf("Finish(%s) = %v", s, err)
		}
	}
	for _, s := range []store.Status{store.InFlight, store.Cancelled, "", "DONE"} {
		if err := prep.Finish(&store.Finish{Status: s}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Finish(%q) = %v, want ErrInvalid", s, err)
		}
	}
	now, next := prep.FinishTimes(&store.Finish{Now: t0})
	if !now.Equal(t0) || !next.Equal(t0) {
		t.Errorf("FinishTimes(Now only) = %v, %v; want both Now", now, next)
	}
	now, next = prep.FinishTimes(&store.Finish{Now: t0, NextAttemptAt: t0.Add(time.Second)})
	if !now.Equal(t0) || !next.Equal(t0.Add(time.Second)) {
		t.Errorf("FinishTimes = %v, %v; want Now and NextAttemptAt", now, next)
	}
	if now, _ := prep.FinishTimes(&store.Finish{}); now.IsZero() {
		t.Error("FinishTimes without Now = the zero time, want the current time")
	}
}

func TestTransition(t *testing.T) {
	for _, to := range []store.Status{store.Cancelled, store.Pending} {
		if now, err := prep.Transition(&store.Transition{To: to, Now: t0}); err != nil || !now.Equal(t0) {
			t.Errorf("Transition(to %s) = %v, %v", to, now, err)
		}
	}
	if now, err := prep.Transition(&store.Transition{To: store.Pending}); err != nil || now.IsZero() {
		t.Errorf("Transition without Now = %v, %v; want the current time", now, err)
	}
	for _, to := range []store.Status{store.Succeeded, store.InFlight, ""} {
		if _, err := prep.Transition(&store.Transition{To: to}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Transition(to %q) = %v, want ErrInvalid", to, err)
		}
	}
}
