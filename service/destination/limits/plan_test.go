package limits_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/retrykit/retry/service/destination/limits"
	"github.com/retrykit/retry/service/store"
)

func TestNewPlan(t *testing.T) {
	t.Parallel()
	now := time.Date(2031, 5, 6, 7, 8, 9, 1999, time.UTC)
	pl, err := limits.NewPlan(store.LimitParams{Key: "t/d", Now: now, PerSecond: 3, Burst: 4,
		MaxWait: 1500 * time.Nanosecond, MaxInFlight: 2, Hold: 1001 * time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	want := limits.Plan{Key: "t/d", Now: now.Truncate(time.Microsecond).UnixMicro(), Interval: 333334,
		Tau: 3 * 333334, MaxWait: 1, MaxInFlight: 2, Hold: 2}
	if got := pl; got.Key != want.Key || got.Now != want.Now || got.Interval != want.Interval || got.Tau != want.Tau ||
		got.MaxWait != want.MaxWait || got.MaxInFlight != want.MaxInFlight || got.Hold != want.Hold {
		t.Errorf("NewPlan = %+v, want %+v", got, want)
	}
	if at := pl.Time(pl.Now); !at.Equal(now.Truncate(time.Microsecond)) || at.Location() != time.UTC {
		t.Errorf("Time(Now) = %v", at)
	}
	for ps, want := range map[float64]int64{10: 100_000, 0.1: 10_000_000, 1e7: 1, 7: 142858} {
		if pl, err := limits.NewPlan(store.LimitParams{Key: "k", Now: now, PerSecond: ps}); err != nil || pl.Interval != want {
			t.Errorf("PerSecond %v: interval %d µs, %v; want %d", ps, pl.Interval, err, want)
		}
	}
	for name, p := range map[string]store.LimitParams{
		"infinite rate":   {PerSecond: math.Inf(1)},
		"a rate too slow": {PerSecond: 1e-12},
		"a burst too big": {PerSecond: 1, Burst: math.MaxInt},
		"a hold too long": {MaxInFlight: 1, Hold: math.MaxInt64},
	} {
		p.Key, p.Now = "k", now
		if _, err := limits.NewPlan(p); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("NewPlan(%s) = %v, want ErrInvalid", name, err)
		}
	}
}
