package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/retrykit/retry/service/destination/limits/limitstest"
	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/postgres/pgtest"
)

func TestLimits(t *testing.T) {
	t.Parallel()
	limitstest.Run(t, func(t *testing.T) store.Limits { return open(t, newSchema(t)) })
}

func TestLimitsShared(t *testing.T) {
	t.Parallel()
	limitstest.RunShared(t, func(t *testing.T) (store.Limits, store.Limits) {
		schema := newSchema(t)
		return open(t, schema), open(t, schema)
	})
}

// TestLimitSlotsDeleted: a key's expired slots are deleted by its next
// call, and the count of its slots follows the rows.
func TestLimitSlotsDeleted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := newSchema(t)
	s := open(t, schema)
	t0 := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	p := store.LimitParams{Key: "t/d", Now: t0, MaxInFlight: 10, Hold: time.Second}
	var slots []string
	for range 5 {
		g, err := s.LimitAcquire(ctx, p)
		if err != nil || !g.OK {
			t.Fatalf("LimitAcquire = %+v, %v", g, err)
		}
		slots = append(slots, g.Slot)
	}
	if err := s.LimitRelease(ctx, p.Key, slots[0]); err != nil {
		t.Fatal(err)
	}
	conn := pgtest.Admin(t)
	defer conn.Close(ctx)
	count := func() (rows, inFlight int) {
		t.Helper()
		err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM `+schema+`.retry_limit_slots),
			(SELECT in_flight FROM `+schema+`.retry_limit_rates WHERE key = 't/d')`).Scan(&rows, &inFlight)
		if err != nil {
			t.Fatal(err)
		}
		return rows, inFlight
	}
	if rows, n := count(); rows != 4 || n != 4 {
		t.Errorf("after 5 grants and a release: %d slot rows, in_flight %d; want 4 and 4", rows, n)
	}
	p.Now = t0.Add(time.Second)
	if g, err := s.LimitAcquire(ctx, p); err != nil || !g.OK {
		t.Fatalf("LimitAcquire after the slots expired = %+v, %v", g, err)
	}
	if rows, n := count(); rows != 1 || n != 1 {
		t.Errorf("after the slots expired and a grant: %d slot rows, in_flight %d; want 1 and 1", rows, n)
	}
}

func BenchmarkLimits(b *testing.B) {
	limitstest.Bench(b, open(b, newSchema(b)))
}
