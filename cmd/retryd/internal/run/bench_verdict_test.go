package run

import (
	"strings"
	"testing"
	"time"
)

// A run fails for a task lost, a second attempt early, or a create the
// API did not acknowledge, and passes with duplicates alone (delivery is
// at least once).
func TestVerdictFails(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v    verdict
		want string
	}{
		{verdict{acked: 10, delivered: 10, succeeded: 10, duplicates: 2}, ""},
		{verdict{acked: 10, delivered: 9, succeeded: 9, lost: 1}, "1 tasks lost"},
		{verdict{acked: 10, delivered: 10, succeeded: 10, retry: true, early: 3}, "3 second attempts early"},
		{verdict{acked: 9, delivered: 9, succeeded: 9, refused: 1}, "1 creates not acknowledged"},
		{verdict{acked: 9, delivered: 9, succeeded: 9, unsent: 1}, "1 creates not acknowledged"},
		{verdict{acked: 9, delivered: 9, succeeded: 10, stray: 1}, "1 unacknowledged tasks ran"},
		{verdict{acked: 9, delivered: 9, succeeded: -1}, "could not be read"},
	} {
		err := tc.v.err()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: err() = %v, want nil", tc.v, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: err() = %v, want one saying %q", tc.v, err, tc.want)
		}
	}
}

// A second attempt counts as early only when it arrived over
// earlyTolerance before its due time, and a task without one is counted.
func TestCheckSecond(t *testing.T) {
	t.Parallel()
	r := &apiRun{}
	var v verdict
	for _, lag := range []time.Duration{0, 5 * time.Millisecond, -earlyTolerance, -earlyTolerance - time.Microsecond, -time.Second} {
		st := new(keyState)
		st.sent1.Store(int64(time.Second))
		st.recv2.Store(int64(2*time.Second + lag))
		r.checkSecond(&v, st)
	}
	r.checkSecond(&v, new(keyState))
	r.checkSecond(&v, nil)
	if v.early != 2 || v.noSecond != 2 || len(v.lags) != 5 {
		t.Errorf("early %d, no second %d, lags %v; want 2, 2 and 5 lags", v.early, v.noSecond, v.lags)
	}
}
