package run

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/service/blob"
	"github.com/retrykit/retry/service/store"
)

// The sweeps of issue 14: retention purges the terminal tasks older than
// --retention with their attempt logs and the blobs they alone held; the
// orphan sweep deletes the blobs no task refers to, which a crash between
// a blob's Put and its task's commit leaves behind.
//
// Retention is checked every purgeEvery: a purge of nothing costs one
// index lookup, and at most that much past the retention is kept. Orphans
// are looked for every orphanEvery, since that lists every blob (on S3,
// LIST requests), and deleted once orphanGrace old: a Put renews its blob's
// time, and a task commits well within the hour after its body's Put, so a
// blob younger than that may be one a create is still on its way to
// refer to. Neither is a flag: they bound work, not what is kept.
const (
	// DefaultRetention keeps a finished task a week: time to look at a
	// dead letter and redrive it, or to answer a repeat of its request,
	// without keeping every task for ever. 0 keeps them for ever.
	DefaultRetention = 7 * 24 * time.Hour

	purgeEvery  = 5 * time.Minute
	purgeFirst  = time.Minute // after start-up, once the scheduler has settled
	orphanEvery = time.Hour
	orphanFirst = 10 * time.Minute
	orphanGrace = time.Hour

	// sweepBatch is how many tasks one purge transaction deletes, and how
	// many blobs one BodyRefsInUse asks about.
	sweepBatch = store.MaxPurgeLimit
	// progressEvery is how often a long purge logs its progress.
	progressEvery = 10 * time.Second
)

// retentionFlag is --retention: a duration (time.ParseDuration's), or a
// whole number of days such as 30d; 0 keeps finished tasks for ever.
type retentionFlag struct{ d *time.Duration }

func (v retentionFlag) String() string {
	if v.d == nil {
		return ""
	}
	if *v.d > 0 && *v.d%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(*v.d/(24*time.Hour)), 10) + "d"
	}
	return v.d.String()
}

func (v retentionFlag) Set(s string) error {
	var d time.Duration
	var err error
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n int64
		n, err = strconv.ParseInt(days, 10, 64)
		if err == nil && (n < 0 || n > 100*365) {
			err = errors.New("out of range")
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		d, err = time.ParseDuration(s)
	}
	if err != nil || d < 0 {
		return fmt.Errorf("%q is not a duration (like 168h or 7d) of 0 or more", s)
	}
	*v.d = d
	return nil
}

// retentionFlags defines --retention.
func retentionFlags(fs *flag.FlagSet, c *Config) {
	c.Retention = DefaultRetention
	fs.Var(retentionFlag{&c.Retention}, "retention", "how long a finished task (succeeded, dead or cancelled) is kept "+
		"after it ended, with its attempt log and the body it alone held (`duration`, like 168h or 30d); 0 keeps them for ever")
}

// sweeper runs the sweeps of one store and blob store.
type sweeper struct {
	st        store.Purger
	blobs     blob.Store // nil: no blob store, nothing to delete but tasks
	retention time.Duration
	log       *slog.Logger
	now       func() time.Time
}

// startSweeps starts the retention sweep of st (unless retention is 0)
// and, when blobs is not nil, the orphan sweep of blobs, and returns a
// function that stops them and waits for them to return, to call before
// closing either store. A store that cannot purge (no store.Purger) gets
// neither.
func startSweeps(ctx context.Context, st store.Store, blobs blob.Store, retention time.Duration, log *slog.Logger) (stop func()) {
	p, ok := st.(store.Purger)
	if !ok {
		log.Warn("the store cannot purge tasks: finished tasks are kept for ever")
		return func() {}
	}
	sw := &sweeper{st: p, blobs: blobs, retention: retention, log: log, now: time.Now}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	if retention > 0 {
		wg.Go(func() { every(ctx, jitter(purgeFirst), purgeEvery, sw.purge) })
	} else {
		log.Info("retention 0: finished tasks are kept for ever")
	}
	if blobs != nil {
		wg.Go(func() { every(ctx, jitter(orphanFirst), orphanEvery, sw.orphans) })
	}
	return func() {
		cancel()
		wg.Wait()
	}
}

// jitter returns d give or take a tenth (backoff's proportional jitter, its
// default factor), so that instances started together do not sweep together.
func jitter(d time.Duration) time.Duration {
	p := backoff.Policy{Kind: backoff.Fixed, Base: d, Max: backoff.None, Jitter: backoff.ProportionalJitter}
	return p.Delay(1, 0, nil)
}

// every calls run after first, then every interval after each run ends,
// until ctx ends.
func every(ctx context.Context, first, interval time.Duration, run func(context.Context)) {
	t := time.NewTimer(first)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		run(ctx)
		t.Reset(interval)
	}
}

// purge runs one retention sweep and logs its outcome.
func (sw *sweeper) purge(ctx context.Context) {
	began := sw.now()
	before := began.Add(-sw.retention)
	tasks, blobs, err := sw.purgeBefore(ctx, before)
	switch {
	case err != nil && ctx.Err() != nil:
	case err != nil:
		sw.log.Warn("retention sweep failed; the next one goes on", "error", err, "tasks_purged", tasks,
			"blobs_deleted", blobs)
	case tasks > 0 || blobs > 0:
		sw.log.Info("retention sweep: purged finished tasks", "tasks", tasks, "blobs_deleted", blobs,
			"ended_before", before.UTC().Format(time.RFC3339), "took", sw.now().Sub(began).Round(time.Millisecond))
	}
}

// purgeBefore purges the tasks that ended before before, batch after
// batch until one comes back short, deleting after each batch the blobs
// of this blob store that its tasks held and no task holds any more. It
// returns the number of tasks and blobs deleted.
func (sw *sweeper) purgeBefore(ctx context.Context, before time.Time) (tasks, blobs int, err error) {
	lastLog := sw.now()
	for batch := 1; ; batch++ {
		refs, n, err := sw.st.TaskPurge(ctx, before, sweepBatch)
		if err != nil {
			return tasks, blobs, fmt.Errorf("purge tasks: %w", err)
		}
		tasks += n
		d, err := sw.deleteUnused(ctx, refs)
		blobs += d
		if err != nil {
			return tasks, blobs, err
		}
		sw.log.Debug("retention sweep: batch purged", "batch", batch, "tasks", n, "blobs_deleted", d)
		if n < sweepBatch {
			return tasks, blobs, nil
		}
		if now := sw.now(); now.Sub(lastLog) >= progressEvery {
			sw.log.Info("retention sweep: still purging", "tasks", tasks, "blobs_deleted", blobs, "batches", batch)
			lastLog = now
		}
		if err := ctx.Err(); err != nil {
			return tasks, blobs, err
		}
	}
}

// deleteUnused deletes the blobs of refs that this blob store owns and no
// task refers to, right after asking, to keep short the window in which a
// create of the same bytes (whose Put found the blob there) could come to
// refer to one. Caller-owned objects are never deleted. It returns how
// many it deleted.
func (sw *sweeper) deleteUnused(ctx context.Context, refs []string) (int, error) {
	if sw.blobs == nil {
		return 0, nil
	}
	var owned []string
	for _, r := range refs {
		if sw.blobs.Owns(r) {
			owned = append(owned, r)
		}
	}
	if len(owned) == 0 {
		return 0, nil
	}
	used, err := sw.st.BodyRefsInUse(ctx, owned)
	if err != nil {
		return 0, fmt.Errorf("body refs in use: %w", err)
	}
	n := 0
	var errs []error
	for _, r := range owned {
		if used[r] {
			continue
		}
		if err := sw.blobs.Delete(ctx, r); err != nil {
			errs = append(errs, fmt.Errorf("delete blob %s: %w", r, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// orphans runs one orphan sweep and logs its outcome.
func (sw *sweeper) orphans(ctx context.Context) {
	began := sw.now()
	listed, deleted, err := sw.deleteOrphans(ctx, began.Add(-orphanGrace))
	switch {
	case err != nil && ctx.Err() != nil:
	case err != nil:
		sw.log.Warn("orphan blob sweep failed; the next one goes on", "error", err, "blobs_listed", listed,
			"deleted", deleted)
	case deleted > 0:
		sw.log.Info("orphan blob sweep: deleted blobs no task refers to", "deleted", deleted, "blobs_listed", listed,
			"took", sw.now().Sub(began).Round(time.Millisecond))
	default:
		sw.log.Debug("orphan blob sweep: no orphans", "blobs_listed", listed)
	}
}

// deleteOrphans deletes the blobs of this blob store last put before
// before that no task refers to, sweepBatch at a time. It returns how many
// blobs it listed and how many it deleted.
func (sw *sweeper) deleteOrphans(ctx context.Context, before time.Time) (listed, deleted int, err error) {
	var batch []string
	flush := func() error {
		n, err := sw.deleteUnused(ctx, batch)
		deleted += n
		batch = batch[:0]
		return err
	}
	err = sw.blobs.List(ctx, func(b blob.Info) error {
		listed++
		if !b.PutAt.Before(before) {
			return nil
		}
		if batch = append(batch, b.Ref); len(batch) == sweepBatch {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return listed, deleted, fmt.Errorf("orphan sweep: %w", err)
	}
	return listed, deleted, nil
}
