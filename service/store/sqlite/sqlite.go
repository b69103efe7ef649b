// Package sqlite is retryd's embedded store: a store.Store in one SQLite
// file, through a pure-Go driver (modernc.org/sqlite, no cgo).
//
// # Durability
//
// The file is in WAL mode with synchronous=FULL: a write method returns only
// after its transaction's commit record is in the WAL and the WAL is synced
// to disk (fsync), so an acknowledged change survives a crash of the process
// or of the machine. Nothing here turns that off. Speed comes from sharing
// the sync instead: SQLite allows one writer, so every write goes through one
// connection, and the write methods called while a commit is in progress are
// run together in the next transaction (group commit), which one fsync makes
// durable; while several callers keep the writer busy, it also waits up to
// a millisecond (never longer than a commit takes) for more of them. TaskClaim and TaskFinish take many tasks per call, and concurrent
// TaskFinish calls are merged into one set of statements. A write that fails
// is rolled back alone: it never leaves half of itself behind, and it does
// not fail the writes it shared a transaction with.
//
// After a crash, reopening the file recovers every acknowledged change and
// no part of any other: a write that had not returned is there whole or
// not at all. Tests check this by copying the files of an open store and
// by killing a writing process with SIGKILL.
//
// # Crash recovery
//
// One process should use a file at a time: the scheduler above keeps due
// tasks in memory. SQLite's file locks keep a second process from
// corrupting the file, not from confusing that scheduler; the Exclusive
// option (retryd's) enforces it with a lock of its own, which the kernel
// drops when the process dies. A Store opened so knows at once that the
// leases it finds are a dead process's, and takes them back without
// waiting for them to run out: a task claimed ahead of its due time and
// never sent (see Store.MaySend) is PENDING again without its attempt
// counted, the others are claimed again at once, their lost attempts
// counted. Without Exclusive, a claim acknowledged before a crash keeps
// its lease until it runs out.
//
// Reads use a separate pool of connections and see every committed change.
//
// # Throughput
//
// A commit costs one fsync (about 1 ms on a typical virtual disk) whatever
// it holds, and a task's claim and finish cost some 30 µs of CPU. So callers
// that want many attempts per second claim tens to hundreds of tasks per
// TaskClaim and finish them in batches or from many goroutines at once;
// BenchmarkClaimFinish and BenchmarkClaimFinishWorkers measure both. A
// retry (PENDING → IN_FLIGHT → PENDING) moves one index entry per step; the
// schema explains how.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/retrykit/retry/service/store"
)

// Defaults of Open's options.
const (
	DefaultReadConns   = 4
	DefaultBusyTimeout = 5 * time.Second
)

// walCheckpointPages is how many pages the WAL grows to before the writer
// copies them into the database file (32 MiB of 4 KiB pages).
const walCheckpointPages = 8192

// writerCacheKiB is the writer's page cache, 16 MiB: with 64 MiB a million
// PENDING tasks created through the API left retryd some 90 MB more resident
// (issue 19's target is 256 MB in all) and were created no faster
// (28,000–36,000/s against 40,000–42,000/s with 16 MiB; scripts/million.sh).
const writerCacheKiB = 16 << 10

// Option changes how Open opens a store.
type Option func(*config)

type config struct {
	readConns   int
	busyTimeout time.Duration
	exclusive   bool
}

// WithReadConns sets the size of the read connection pool (n < 1 means
// DefaultReadConns). Writes always use one connection of their own.
func WithReadConns(n int) Option { return func(c *config) { c.readConns = n } }

// WithBusyTimeout sets how long a statement waits for a lock held by another
// process on the same file before failing (d ≤ 0 means DefaultBusyTimeout).
func WithBusyTimeout(d time.Duration) Option { return func(c *config) { c.busyTimeout = d } }

// Store is a store.Store in an SQLite file. It is safe for concurrent use;
// see the package documentation for what it guarantees.
type Store struct {
	rdb  *sql.DB
	wdb  *sql.DB
	w    *wtx
	ops  chan *writeOp
	quit chan struct{} // closed by Close: the writer stops taking operations

	writerDone chan struct{}
	closed     atomic.Bool
	closeOnce  sync.Once
	closeErr   error

	readMu    sync.Mutex
	readStmts map[string]*sql.Stmt

	owner    *owner // the lock file, when Exclusive
	tookBack [2]int // what Open took back: tasks released unsent, leases ended
}

// TookBack reports what an Exclusive Open took back from the file's last
// owner: released, the tasks it had claimed ahead of their due time and
// never sent (PENDING again, their attempts not charged), and expired,
// the leases it ended at once (claimed again straight away, the lost
// attempt counted).
func (s *Store) TookBack() (released, expired int) { return s.tookBack[0], s.tookBack[1] }

// Open opens the store in the file at path, creating it if needed, and
// applies the embedded migrations it lacks. path may carry a "sqlite://"
// or "file:" prefix; ":memory:" is refused, since a store must be durable.
// ctx bounds the opening only.
func Open(ctx context.Context, path string, opts ...Option) (*Store, error) {
	cfg := config{readConns: DefaultReadConns, busyTimeout: DefaultBusyTimeout}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.readConns < 1 {
		cfg.readConns = DefaultReadConns
	}
	if cfg.busyTimeout <= 0 {
		cfg.busyTimeout = DefaultBusyTimeout
	}
	path = strings.TrimPrefix(strings.TrimPrefix(path, "sqlite://"), "file:")
	if path == "" || strings.HasPrefix(path, ":memory:") || strings.Contains(path, "mode=memory") {
		return nil, fmt.Errorf("sqlite: open %q: a durable store needs a file: %w", path, store.ErrInvalid)
	}
	var own *owner
	var prevHorizon int64
	var trusted bool
	if cfg.exclusive {
		// The lock is taken before the file is opened, so that a second
		// retryd never touches a database another one runs on.
		var err error
		if own, prevHorizon, trusted, err = lockOwner(path); err != nil {
			return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
		}
	}
	s, err := open(ctx, path, cfg)
	if err != nil {
		own.close()
		return nil, err
	}
	s.owner = own
	if own != nil && own.locked {
		released, expired, err := s.takeBack(ctx, prevHorizon, trusted)
		if err == nil {
			// From here on the horizon is this process's: nothing sent yet.
			err = own.write(0)
		}
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("sqlite: open %s: take back the last owner's leases: %w", path, err)
		}
		s.tookBack = [2]int{released, expired}
	}
	return s, nil
}

// open opens the store in the file at path (without prefixes).
func open(ctx context.Context, path string, cfg config) (*Store, error) {
	name := "file:" + (&url.URL{Path: path}).EscapedPath()
	pragmas := fmt.Sprintf("?_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=foreign_keys(OFF)",
		cfg.busyTimeout.Milliseconds())

	// The WAL is checkpointed every walCheckpointPages instead of SQLite's
	// 1000: a checkpoint copies each page once however often the WAL holds
	// it, and the pages a retry queue rewrites are mostly the same few
	// (its live tasks), so fewer, larger checkpoints copy far less.
	wdb, err := sql.Open("sqlite", name+pragmas+fmt.Sprintf("&_pragma=wal_autocheckpoint(%d)", walCheckpointPages)+
		fmt.Sprintf("&_pragma=cache_size(-%d)&_pragma=temp_store(MEMORY)", writerCacheKiB))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetConnMaxIdleTime(0)
	conn, err := wdb.Conn(ctx)
	if err != nil {
		wdb.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	s := &Store{
		wdb:        wdb,
		w:          &wtx{conn: conn, stmts: map[string]*sql.Stmt{}},
		ops:        make(chan *writeOp),
		quit:       make(chan struct{}),
		writerDone: make(chan struct{}),
		readStmts:  map[string]*sql.Stmt{},
	}
	err = s.checkSettings(ctx)
	if err == nil {
		err = migrate(ctx, conn)
	}
	if err != nil {
		conn.Close()
		wdb.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	// The readers open only after the migration, so that none sees a
	// half-made schema.
	s.rdb, err = sql.Open("sqlite", name+pragmas+"&_pragma=query_only(1)")
	if err != nil {
		conn.Close()
		wdb.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	s.rdb.SetMaxOpenConns(cfg.readConns)
	s.rdb.SetMaxIdleConns(cfg.readConns)
	go s.writeLoop()
	return s, nil
}

// checkSettings makes sure the pragmas that durability rests on took hold:
// journal_mode cannot become WAL on some file systems, and a store that
// silently fell back would still be durable but slower than promised.
func (s *Store) checkSettings(ctx context.Context) error {
	var mode string
	var syncLevel int
	if err := s.w.conn.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return err
	}
	if err := s.w.conn.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&syncLevel); err != nil {
		return err
	}
	if !strings.EqualFold(mode, "wal") || syncLevel != 2 {
		return fmt.Errorf("journal_mode=%s synchronous=%d, want wal and 2 (FULL)", mode, syncLevel)
	}
	return nil
}

// Ping reports whether the file can be read.
func (s *Store) Ping(ctx context.Context) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	var one int
	if err := s.rdb.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("sqlite: ping: %w", err)
	}
	return nil
}

// Close waits for the write in progress, fails the queued ones with
// store.ErrClosed and closes the file. Calling it again returns nil.
func (s *Store) Close() error {
	first := false
	s.closeOnce.Do(func() {
		first = true
		s.closed.Store(true)
		close(s.quit)
		<-s.writerDone
		s.closeErr = errors.Join(s.w.close(), s.wdb.Close(), s.rdb.Close(), s.owner.close())
	})
	if !first {
		return nil
	}
	return s.closeErr
}

// readStmt returns a prepared statement of the read pool, preparing it once.
func (s *Store) readStmt(ctx context.Context, query string) (*sql.Stmt, error) {
	s.readMu.Lock()
	defer s.readMu.Unlock()
	if st, ok := s.readStmts[query]; ok {
		return st, nil
	}
	st, err := s.rdb.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	s.readStmts[query] = st
	return st, nil
}

// read checks that the store is open and returns the prepared query.
func (s *Store) read(ctx context.Context, query string) (*sql.Stmt, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	return s.readStmt(ctx, query)
}

var _ store.Store = (*Store)(nil)
