package sqlite_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/sqlite"
)

func TestExclusiveRefusesASecondStore(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "retryd.db")
	first, err := sqlite.Open(context.Background(), path, sqlite.Exclusive())
	if err != nil {
		t.Fatal(err)
	}
	_, err = sqlite.Open(context.Background(), path, sqlite.Exclusive())
	if !errors.Is(err, sqlite.ErrLocked) || !strings.Contains(err.Error(), "one retryd per database file") {
		t.Fatalf("second Open = %v, want ErrLocked saying why", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := sqlite.Open(context.Background(), path, sqlite.Exclusive())
	if err != nil {
		t.Fatalf("Open after the first closed = %v", err)
	}
	again.Close()
}

// TestExclusiveTakesBackLeases leaves three tasks IN_FLIGHT as a dead
// process would: one sent (due within the horizon MaySend recorded), one
// claimed ahead and never sent, one claimed with a horizon the next owner
// cannot trust. Reopening takes all of them back at once, charging only
// the attempts that may have been sent.
func TestExclusiveTakesBackLeases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "retryd.db")
	s, err := sqlite.Open(ctx, path, sqlite.Exclusive())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Millisecond)
	sent := create(t, s, now.Add(-time.Second))
	unsent := create(t, s, now.Add(30*time.Minute))
	const lease = time.Hour
	// The scheduler claims ahead of the due time (here far ahead, so
	// that the task is not due yet when the test claims again).
	got, err := s.TaskClaim(ctx, store.ClaimParams{Now: now.Add(31 * time.Minute), Lease: lease, Limit: 10})
	if err != nil || len(got) != 2 {
		t.Fatalf("TaskClaim = %d tasks, %v; want 2", len(got), err)
	}
	if err := s.MaySend(ctx, sent); err != nil {
		t.Fatal(err)
	}
	s.Close() // as the kernel does for a killed process: the lock goes, the lock file stays

	s, err = sqlite.Open(ctx, path, sqlite.Exclusive())
	if err != nil {
		t.Fatal(err)
	}
	if released, expired := s.TookBack(); released != 1 || expired != 1 {
		t.Errorf("TookBack() = %d released, %d expired; want 1 and 1", released, expired)
	}
	u, err := s.TaskGet(ctx, "t", unsent.ID)
	if err != nil {
		t.Fatal(err)
	}
	if u.Status != store.Pending || u.AttemptNumber != 0 || !u.NextAttemptAt.Equal(unsent.NextAttemptAt) || u.LastError != "" {
		t.Errorf("unsent task after reopening: %s #%d due %v %q; want PENDING #0 due %v, no error",
			u.Status, u.AttemptNumber, u.NextAttemptAt, u.LastError, unsent.NextAttemptAt)
	}
	claimNow := time.Now()
	got, err = s.TaskClaim(ctx, store.ClaimParams{Now: claimNow, Lease: lease, Limit: 10})
	if err != nil || len(got) != 1 || got[0].ID != sent.ID {
		t.Fatalf("TaskClaim right after reopening = %v, %v; want the sent task, its lease ended", ids(got), err)
	}
	if got[0].AttemptNumber != 2 || got[0].LastError != store.LeaseExpiredMessage {
		t.Errorf("sent task claimed again as attempt %d, %q; want 2, the lost attempt charged", got[0].AttemptNumber, got[0].LastError)
	}
	if err := s.MaySend(ctx, &store.Task{NextAttemptAt: claimNow}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// A horizon from another boot of the machine (one a power loss may
	// have cut short) is not trusted: every lease is charged.
	if err := os.WriteFile(path+".lock", []byte("horizon another-boot 99999999999999\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err = sqlite.Open(ctx, path, sqlite.Exclusive())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if released, expired := s.TookBack(); released != 0 || expired != 1 {
		t.Errorf("with an untrusted horizon, TookBack() = %d released, %d expired; want 0 and 1", released, expired)
	}
}

// Without Exclusive, nothing is locked and no lease is taken back: a
// store used so may share its file.
func TestNotExclusiveLeavesLeases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, path := open(t)
	defer s.Close()
	create(t, s, time.Now())
	if got, err := s.TaskClaim(ctx, store.ClaimParams{Now: time.Now(), Lease: time.Hour}); err != nil || len(got) != 1 {
		t.Fatalf("TaskClaim = %v, %v", ids(got), err)
	}
	other, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if released, expired := other.TookBack(); released+expired != 0 {
		t.Errorf("TookBack() = %d, %d; want nothing", released, expired)
	}
	if got, err := other.TaskClaim(ctx, store.ClaimParams{Now: time.Now(), Lease: time.Hour}); err != nil || len(got) != 0 {
		t.Errorf("TaskClaim of a held lease = %v, %v; want none", ids(got), err)
	}
}

func create(t *testing.T, s *sqlite.Store, due time.Time) *store.Task {
	t.Helper()
	task, _, err := s.TaskCreate(context.Background(), &store.Task{Tenant: "t", RequestHash: "h", Method: "POST",
		TargetURL: "http://127.0.0.1:9/", NextAttemptAt: due})
	if err != nil {
		t.Fatal(err)
	}
	return task
}

func ids(ts []*store.Task) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.ID)
	}
	return out
}
