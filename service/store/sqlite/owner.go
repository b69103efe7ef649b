package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/epochms"
)

// ErrLocked is returned (wrapped) by Open with Exclusive when another
// process, or another Store of this one, holds the file.
var ErrLocked = errors.New("sqlite: the store is in use by another process")

// Exclusive makes the Store the file's only user while it is open, as
// retryd is: Open takes an OS lock (flock) on a file beside the database
// (its path with ".lock" added), and fails with ErrLocked when another
// holds it. The lock is the process's until Close, or until the process
// ends in any way: the kernel drops it on kill -9, so a restart never waits
// for a stale lock.
//
// Holding the lock, the Store knows that whoever held the tasks still
// IN_FLIGHT is gone, so Open takes every lease back at once, instead of
// leaving each to run out (see the package documentation, Crash recovery).
// On systems without flock (Windows, Plan 9), Exclusive locks nothing and
// takes no lease back early.
func Exclusive() Option { return func(c *config) { c.exclusive = true } }

// sendSlack is how far past the due time a send horizon is recorded, so
// that attempts due close together share one write of the lock file.
const sendSlack = 10 * time.Millisecond

// owner is an exclusive Store's hold on its lock file, where it also keeps
// its send horizon: every attempt this process may have sent so far was
// due no later than it (see MaySend).
type owner struct {
	f      *os.File
	boot   string // the machine's boot ID, "" when it has none
	locked bool   // false where the system has no flock
	mu     sync.Mutex
	sendTo atomic.Int64 // the horizon written, epoch ms
}

// lockOwner opens and locks path's lock file, and reads the horizon its
// last owner left: ok false when there is none that can be trusted.
func lockOwner(path string) (o *owner, prev int64, ok bool, err error) {
	f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, 0, false, fmt.Errorf("lock file: %w", err)
	}
	locked, err := lockFile(f)
	if err != nil {
		f.Close()
		if errors.Is(err, errWouldBlock) {
			return nil, 0, false, fmt.Errorf("%s is locked: %w (one retryd per database file; stop the other, or give this one another --store)", f.Name(), ErrLocked)
		}
		return nil, 0, false, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	o = &owner{f: f, boot: bootID(), locked: locked}
	buf := make([]byte, 128)
	n, _ := f.ReadAt(buf, 0)
	prev, ok = o.parse(string(buf[:n]))
	return o, prev, ok, nil
}

// The lock file holds one line, "horizon <boot ID> <epoch ms>", padded to
// a fixed length so that every write replaces the whole of it.
const horizonLen = 80

// parse reads a horizon line, trusting it only when it was written since
// the machine last started: a write the kernel had not put on disk before
// a power loss may be missing, and an old horizon would let a restart
// forgo charging attempts that were sent. (A process killed outright loses
// nothing: its writes are in the kernel's cache.)
func (o *owner) parse(s string) (int64, bool) {
	f := strings.Fields(s)
	if o.boot == "" || len(f) != 3 || f[0] != "horizon" || f[1] != o.boot {
		return 0, false
	}
	ms, err := strconv.ParseInt(f[2], 10, 64)
	return ms, err == nil
}

// write records horizon ms in the lock file.
func (o *owner) write(ms int64) error {
	line := fmt.Sprintf("horizon %s %d", o.boot, ms)
	line += strings.Repeat(" ", max(horizonLen-1-len(line), 0)) + "\n"
	if _, err := o.f.WriteAt([]byte(line), 0); err != nil {
		return fmt.Errorf("sqlite: write the send horizon: %w", err)
	}
	return nil
}

// maySend raises the horizon to due (and a little beyond), if it is not
// there yet.
func (o *owner) maySend(due time.Time) error {
	ms := epochms.Of(store.CeilMillis(due))
	if ms <= o.sendTo.Load() {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if ms <= o.sendTo.Load() {
		return nil
	}
	to := max(ms, epochms.Of(time.Now())) + sendSlack.Milliseconds()
	if err := o.write(to); err != nil {
		return err
	}
	o.sendTo.Store(to)
	return nil
}

func (o *owner) close() error {
	if o == nil {
		return nil
	}
	if o.locked {
		if err := unlockFile(o.f); err != nil {
			o.f.Close()
			return fmt.Errorf("sqlite: unlock %s: %w", o.f.Name(), err)
		}
	}
	return o.f.Close()
}

// bootID names the machine's current boot (Linux); "" elsewhere.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// MaySend implements store.SendHorizon: the scheduler calls it before it
// sends t's attempt. On an Exclusive store it records in the lock file
// that this process may send attempts due up to t's due time, so
// that the next owner, after a crash, knows that a task due later was
// never sent (see takeBack); otherwise it does nothing.
func (s *Store) MaySend(_ context.Context, t *store.Task) error {
	if s.owner == nil {
		return nil
	}
	return s.owner.maySend(t.NextAttemptAt)
}

// takeBack ends, at once, the leases the last owner of the file left: it
// is dead, since this Store holds the lock. A task due after prev (the
// horizon it left; ok false when there is none to trust) was claimed ahead
// of time and never sent, so it goes back to PENDING, due as before, and
// its attempt is not charged. The others may have reached their targets:
// their leases end now, and the next claim counts and logs the lost
// attempt (store.LeaseExpiredMessage).
func (s *Store) takeBack(ctx context.Context, prev int64, ok bool) (released, expired int, err error) {
	now := epochms.Of(time.Now())
	if !ok {
		prev = now + int64(100*365*24*time.Hour/time.Millisecond) // no horizon: every attempt may have been sent
	}
	err = s.write(ctx, &writeOp{run: func(w *wtx) error {
		released, expired = 0, 0
		rows, err := w.query(`UPDATE tasks SET status = 'PENDING', wake_at = next_attempt_at, lease_until = 0,
			attempt_number = attempt_number - 1, updated_at = ?1, version = version + 1
			WHERE state = 'LIVE' AND status = 'IN_FLIGHT' AND next_attempt_at > ?2 RETURNING tenant`, now, prev)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var tenant string
			if err := rows.Scan(&tenant); err != nil {
				return err
			}
			w.move(tenant, store.InFlight, store.Pending)
			released++
		}
		if err := rows.Err(); err != nil {
			return err
		}
		res, err := w.exec(`UPDATE tasks SET wake_at = ?1, lease_until = ?1, updated_at = ?1, version = version + 1
			WHERE state = 'LIVE' AND status = 'IN_FLIGHT' AND lease_until > ?1`, now)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		expired = int(n)
		return err
	}})
	return released, expired, err
}
