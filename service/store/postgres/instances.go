package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/retrykit/retry/service/store"
)

// sendSlack is how far past an attempt's due time MaySend moves the
// horizon, so that the attempts due within it share one write.
const sendSlack = 20 * time.Millisecond

// instance is the store's membership of the fleet (store.Instances): its
// ID, empty before Join and after Leave, and its send horizon.
type instance struct {
	id     string
	sendTo time.Time // the horizon written; zero: nothing sent yet
}

// holder returns the instance claims name, "" for none.
func (s *Store) holder() string {
	s.inst.Lock()
	defer s.inst.Unlock()
	return s.inst.id
}

// Join registers a new instance; see store.Instances.
func (s *Store) Join(ctx context.Context, now time.Time) (string, error) {
	if s.closed.Load() {
		return "", store.ErrClosed
	}
	id := store.NewID()
	if _, err := s.pool.Exec(ctx, `INSERT INTO retry_instances (id, started_at, beat_at) VALUES ($1, $2, $2)`,
		id, ts(now)); err != nil {
		return "", s.fail("join", err)
	}
	s.inst.Lock()
	s.inst.instance = instance{id: id}
	s.inst.Unlock()
	return id, nil
}

// beatSQL moves the instance's beat and extends its leases that end before
// $4 and were taken after $5 to $3; leases a claim or finish has locked
// are left for the next beat rather than waited for. It returns whether
// the instance still exists.
const beatSQL = `WITH b AS (UPDATE retry_instances SET beat_at = $2 WHERE id = $1 RETURNING id),
ext AS (UPDATE retry_runs r SET lease_until = $3, wake_at = $3 WHERE r.task_seq IN (
	SELECT task_seq FROM retry_runs WHERE holder = $1 AND status = 'IN_FLIGHT' AND lease_until < $4
		AND claimed_at > $5 AND EXISTS (SELECT FROM b) FOR UPDATE SKIP LOCKED) RETURNING 1)
SELECT (SELECT count(*) FROM b), (SELECT count(*) FROM ext)`

// Beat records that the instance is alive; see store.Instances.
func (s *Store) Beat(ctx context.Context, now time.Time, lease time.Duration) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	id := s.holder()
	if id == "" {
		return fmt.Errorf("postgres: beat: %w: not joined", store.ErrInvalid)
	}
	var alive, extended int64
	if err := s.pool.QueryRow(ctx, beatSQL, id, ts(now), ts(now.Add(lease)), ts(now.Add(lease/2)), ts(now.Add(-lease))).
		Scan(&alive, &extended); err != nil {
		return s.fail("beat", err)
	}
	if alive > 0 {
		return nil
	}
	// Found dead: its leases are being taken back, and its attempts'
	// outcomes will be refused. Claims from now on are a new instance's.
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	newID, err := s.joinAgain(ctx, id, now)
	if err != nil {
		return err
	}
	return fmt.Errorf("postgres: beat: instance %s was taken for dead and its leases taken back; joined again as %s: %w",
		id, newID, store.ErrLeaseLost)
}

// Leave forgets the instance; see store.Instances.
func (s *Store) Leave(ctx context.Context) error {
	s.inst.Lock()
	id := s.inst.id
	s.inst.instance = instance{}
	s.inst.Unlock()
	if id == "" || s.closed.Load() {
		return nil
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM retry_instances WHERE id = $1`, id); err != nil {
		return s.fail("leave", err)
	}
	return nil
}

// MaySend raises the instance's send horizon to t's due time; see
// store.SendHorizon. Callers wait for one another's write, so that a
// round of attempts coming due together costs one write.
func (s *Store) MaySend(ctx context.Context, t *store.Task) error {
	if t.Holder == "" {
		return nil // claimed without an instance: leases run out as they always did
	}
	due := store.CeilMillis(t.NextAttemptAt)
	s.inst.Lock()
	cur := s.inst.instance
	s.inst.Unlock()
	if cur.id == t.Holder && !due.After(cur.sendTo) {
		return nil // within the horizon: the common case, without waiting for a raise in progress
	}
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	s.inst.Lock()
	cur = s.inst.instance
	s.inst.Unlock()
	if cur.id != t.Holder {
		return fmt.Errorf("postgres: send: the lease of task %s is instance %s's, taken for dead: %w", t.ID, t.Holder, store.ErrLeaseLost)
	}
	if !due.After(cur.sendTo) {
		return nil
	}
	to := maxTime(due, time.Now()).Add(sendSlack)
	tag, err := s.pool.Exec(ctx, `UPDATE retry_instances SET send_to = greatest(send_to, $2) WHERE id = $1`, cur.id, ts(to))
	if err != nil {
		return s.fail("send horizon", err)
	}
	if tag.RowsAffected() == 0 {
		newID, err := s.joinAgain(ctx, cur.id, time.Now())
		if err != nil {
			return fmt.Errorf("postgres: send: instance %s was taken for dead (joining again: %v): %w", cur.id, err, store.ErrLeaseLost)
		}
		return fmt.Errorf("postgres: send: instance %s was taken for dead; joined again as %s: %w", cur.id, newID, store.ErrLeaseLost)
	}
	s.inst.Lock()
	if s.inst.id == cur.id {
		s.inst.sendTo = to.Truncate(time.Millisecond)
	}
	s.inst.Unlock()
	return nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// reclaimSQL deletes the instances whose beat is before $2 and takes back
// their leases: released unsent (due after the horizon: PENDING again,
// the claim's attempt count undone) or ended at $1, to be claimed again
// with the lost attempt charged. Both bump the version, which fences the
// old holder, and notify the feed ($3) of the task.
const reclaimSQL = `WITH dead AS (DELETE FROM retry_instances WHERE beat_at < $2 RETURNING id, send_to),
held AS (SELECT r.task_seq, d.send_to IS NULL OR r.next_attempt_at > d.send_to AS unsent
	FROM retry_runs r JOIN dead d ON r.holder = d.id WHERE r.status = 'IN_FLIGHT' FOR UPDATE OF r),
back AS (UPDATE retry_runs r SET
		status = CASE WHEN h.unsent THEN 'PENDING' ELSE r.status END,
		wake_at = CASE WHEN h.unsent THEN r.next_attempt_at ELSE $1 END,
		lease_until = CASE WHEN h.unsent THEN NULL ELSE $1 END,
		attempt_number = r.attempt_number - CASE WHEN h.unsent THEN 1 ELSE 0 END,
		holder = NULL, version = r.version + 1, updated_at = $1
	FROM held h WHERE r.task_seq = h.task_seq
	RETURNING r.task_seq, r.wake_at, r.version, h.unsent),
moves AS (SELECT 'IN_FLIGHT'::text AS from_s, 'PENDING'::text AS to_s, t.tenant
	FROM back JOIN retry_tasks t ON t.seq = back.task_seq WHERE back.unsent),
` + countsCTE + `,
notes AS (SELECT t.id, back.wake_at, back.version, back.unsent,
		t.id || ' ' || (extract(epoch FROM back.wake_at) * 1000)::bigint || ' ' || back.version AS note
	FROM back JOIN retry_tasks t ON t.seq = back.task_seq)
SELECT n.id, n.wake_at, n.version, n.unsent FROM notes n, LATERAL pg_notify($3, n.note)`

// ReclaimDead takes back the leases of dead instances; see
// store.Instances.
func (s *Store) ReclaimDead(ctx context.Context, now time.Time, after time.Duration) ([]store.Due, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	// Most of the time no instance is dead: one look at the small
	// instances table says so, instead of running the whole statement,
	// whose plan over retry_runs costs far more (retryd bench: PostgreSQL
	// end-to-end creates fell from 2,650 to 1,600 a second with it run
	// four times a second).
	var anyDead bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM retry_instances WHERE beat_at < $1)`,
		ts(now.Add(-after))).Scan(&anyDead); err != nil {
		return nil, s.fail("reclaim", err)
	}
	if !anyDead {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, reclaimSQL, ts(now), ts(now.Add(-after)), s.channel)
	if err != nil {
		return nil, s.fail("reclaim", err)
	}
	defer rows.Close()
	var out []store.Due
	released := 0
	for rows.Next() {
		var d store.Due
		var wake pgtype.Timestamptz
		var unsent bool
		if err := rows.Scan(&d.ID, &wake, &d.Version, &unsent); err != nil {
			return nil, s.fail("reclaim", err)
		}
		d.At = fromTS(wake)
		if unsent {
			released++
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("reclaim", err)
	}
	if len(out) > 0 {
		s.log.LogAttrs(ctx, slog.LevelWarn, "postgres: took back the leases of an instance that stopped beating",
			slog.Int("tasks", len(out)), slog.Int("unsent_released", released))
	}
	return out, nil
}

var (
	_ store.Instances   = (*Store)(nil)
	_ store.SendHorizon = (*Store)(nil)
	_ store.Fleet       = (*Store)(nil)
)

// InstancesAlive counts the instances that beat after now-within; see
// store.Fleet.
func (s *Store) InstancesAlive(ctx context.Context, now time.Time, within time.Duration) (int, error) {
	if s.closed.Load() {
		return 0, store.ErrClosed
	}
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM retry_instances WHERE beat_at > $1`,
		ts(now.Add(-within))).Scan(&n); err != nil {
		return 0, s.fail("instances alive", err)
	}
	return n, nil
}

// joinAgain joins as a new instance if id, found dead, is still this
// Store's, so that its claims from then on are a live instance's: Beat and
// MaySend both find out, and a claim under a dead instance is refused at
// MaySend, uncharged but in vain, until the Store has joined again. The
// caller holds sendMu, so that only the first of them joins.
func (s *Store) joinAgain(ctx context.Context, id string, now time.Time) (string, error) {
	if cur := s.holder(); cur != id {
		return cur, nil
	}
	return s.Join(ctx, now)
}
