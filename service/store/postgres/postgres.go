// Package postgres is a store.Store in PostgreSQL, through pgx/v5 and its
// pool, for several retryd instances sharing one database.
//
// # Schema
//
// Open (and Migrate, which `retryd migrate` runs) applies the numbered
// migrations embedded from migrations/NNN_name.up.sql that the database
// lacks, each in a transaction of its own with its row in
// retry_schema_migrations, under an advisory lock, so instances starting
// at once apply each migration once, and a migration that fails leaves the
// schema as it was. Tables are prefixed retry_; WithSchema (or search_path
// in the URL) puts them in a schema of their own.
//
// Claims and retries rewrite one narrow row per task (retry_runs, two
// indexes); the request, the list indexes, the attempt log and the counts
// live in tables a retry does not touch. migrations/001_init.up.sql says
// why each index is there.
//
// # Several instances
//
// TaskClaim leases due tasks with one UPDATE whose candidates come from an
// ordered index scan with FOR UPDATE SKIP LOCKED, so concurrent claims, from
// one process or many, never take the same task and never wait for each
// other. Each lease carries a version that TaskFinish checks, so a worker
// whose lease was taken over cannot overwrite the task.
//
// Each retryd instance joins retry_instances (store.Instances), beats in
// it, and names itself in its leases (retry_runs.holder): the leases of an
// instance whose beat stopped are taken back within seconds (ReclaimDead),
// the tasks it claimed ahead and never sent uncharged (store.SendHorizon).
//
// Writes that make a task due sooner (TaskCreate, a redrive, a finish that
// schedules a retry) send a NOTIFY in their transaction; Listen delivers
// them to every instance, so that a task created through one instance's API
// can be run by another without waiting for a poll. A report reaches the
// other instances as the writer's commit completes (BenchmarkListenLag:
// under 1 ms after TaskCreate returns, at p99). PostgreSQL holds a lock of
// the whole database from a notifying transaction's pre-commit to the end
// of its WAL flush, so such commits, of every instance, queue one behind
// the other: a batch of creates therefore sends one notification for all
// its tasks (as many as their notes need at 8000 bytes each), and
// concurrent TaskCreate calls share batches.
//
// # Throughput
//
// A commit costs a WAL flush (about 1 ms on this project's virtual disk),
// so TaskClaim and TaskFinish take many tasks per statement: on a loaded
// 2-core machine with the server on it, claim+finish of batches of 64 runs
// at about 13,000–16,000 tasks/s and of 256 at 15,000–19,000, against
// about 450 one task at a time (BenchmarkClaimFinish). Creates share
// commits the same way: TaskCreateBatch is one round trip and one commit
// for any number of tasks, and TaskCreate calls made while a batch is
// under way are gathered into the next one, which, while the store is
// busy, waits up to a millisecond for as many as recent batches held
// (package linger; retryd bench, 8 clients: 6,083–6,241 tasks/s against
// 5,651–5,842, and a tenth less CPU). On the same machine, creates
// one call at a time from 16 goroutines run at about 14,000 tasks/s
// (3,400 when each was a commit of its own), from 8 at about 8,300, and
// from two instances of 8 each at about 9,500; batches of 100 at about
// 40,000 (BenchmarkCreate, BenchmarkCreateInstances, BenchmarkCreateBatch).
//
// Each instance needs a connection per concurrent call plus one per
// Listen; pgxpool's default pool is max(4, GOMAXPROCS) connections, and
// pool_max_conns in the URL sets another.
//
// # Durability
//
// Every method that changes data commits before it returns; with
// PostgreSQL's default synchronous_commit=on the commit is flushed to the
// write-ahead log first, so an acknowledged change survives a crash of the
// server. A server run with synchronous_commit=off or fsync=off (or a
// session that sets them) gives that up; this package never does.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/coalesce"
	"github.com/retrykit/retry/service/store/internal/linger"
)

// createRuns is how many batches of TaskCreate calls a Store runs at once.
// One: the NOTIFY of every batch takes a lock that PostgreSQL holds
// through the commit's WAL flush, so the commits of batches in flight
// queue one behind the other anyway; a second batch would only overlap its
// round trip with the first's commit while halving both batches, and fewer,
// bigger batches create faster and cost less CPU (BenchmarkCreateRuns,
// medians of 12 runs on 2 shared cores, 16 callers: about 14,400 tasks/s
// with one run, 12,000 with two, 7,800 with four; 8 callers: 8,300, 7,000
// and 4,300; with the disk made slow by another writer, 8 callers: about
// 3,600 with one run, 2,200 with two). retryd's API bench with 8 clients,
// which does not take creates to the store's limit, saw no clear
// difference: each setting was ahead by up to 8% in one condition.
const createRuns = 1

// DefaultReconnect returns the backoff between Listen's attempts to
// reconnect: exponential from 100ms to 5s, with full jitter.
func DefaultReconnect() backoff.Policy {
	return backoff.Policy{Kind: backoff.Exponential, Base: 100 * time.Millisecond, Max: 5 * time.Second}
}

// Option changes how Open opens a store.
type Option func(*config)

type config struct {
	schema     string
	logger     *slog.Logger
	reconnect  backoff.Policy
	createRuns int // for benchmarks; see createRuns
}

// WithSchema keeps the store's tables in schema, which must exist: it
// becomes the connections' search_path. An empty schema keeps the URL's
// search_path (PostgreSQL's default is "$user", public).
func WithSchema(schema string) Option { return func(c *config) { c.schema = schema } }

// WithLogger sets where the store logs reclaimed leases and Listen's
// reconnections; nil means slog.Default().
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithReconnect sets the backoff between Listen's attempts to reconnect; the
// zero Policy means DefaultReconnect.
func WithReconnect(p backoff.Policy) Option { return func(c *config) { c.reconnect = p } }

// Store is a store.Store in a PostgreSQL database. It is safe for
// concurrent use, and several Stores, in one process or many, may share a
// database; see the package documentation.
type Store struct {
	pool      *pgxpool.Pool
	connCfg   *pgx.ConnConfig // for Listen's connections, which are not the pool's
	channel   string
	log       *slog.Logger
	reconnect retry.Policy

	// creates gathers concurrent TaskCreate calls into TaskCreateBatch
	// calls: each commit, and each NOTIFY, then serves many creates.
	creates *coalesce.Coalescer[*store.Task, store.CreateResult]

	// inst is the instance this Store is (store.Instances); sendMu
	// makes MaySend's callers wait for one write of the horizon.
	inst struct {
		sync.Mutex
		instance
	}
	sendMu sync.Mutex

	life      context.Context // cancelled by Close
	stop      context.CancelFunc
	closed    atomic.Bool
	closeOnce sync.Once
}

// Open connects to the database at url (a postgres:// URL or a key=value
// connection string, as pgx reads them; pool_max_conns and the other
// pgxpool settings apply), applies the embedded migrations it lacks, and
// returns the store. ctx bounds the opening only.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	cfg := config{}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.logger == nil {
		cfg.logger = slog.Default()
	}
	if cfg.reconnect.IsZero() {
		cfg.reconnect = DefaultReconnect()
	}
	pcfg, err := poolConfig(url, cfg.schema)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	schema, err := migrate(ctx, conn.Conn(), migrationFiles)
	conn.Release()
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	s := &Store{
		pool:    pool,
		connCfg: pcfg.ConnConfig,
		channel: channelName(schema),
		log:     cfg.logger,
		reconnect: retry.Policy{
			Backoff:     cfg.reconnect,
			MaxAttempts: math.MaxInt32, // until the context ends
			Name:        "postgres.listen",
			Logger:      cfg.logger,
		},
	}
	if cfg.createRuns <= 0 {
		cfg.createRuns = createRuns
	}
	s.creates = coalesce.New(coalesce.Config[*store.Task, store.CreateResult]{
		Run: s.TaskCreateBatch, MaxRuns: cfg.createRuns, Linger: linger.Max})
	s.life, s.stop = context.WithCancel(context.Background())
	return s, nil
}

// poolConfig parses url and points its search_path at schema, if set.
//
// It also turns enable_seqscan off for the store's connections. Every
// statement the store runs is meant to find its rows through an index (by
// ID, key, sequence or wake time), but pgx prepares statements once per
// connection, and PostgreSQL then keeps a generic plan made when the
// tables were small: a hash join over a sequential scan of retry_tasks,
// which each claim, finish and create batch went on paying as the table
// grew, until an autoanalyze (a minute later, at the earliest) replanned
// it. retryd bench on a new schema, 20,000 single creates: 2,249
// sequential scans reading 17.6 million rows before, none after, and
// 3,600 tasks/s against 3,070. Where no index serves, PostgreSQL still
// scans: the setting only makes a scan the last resort.
//
// A generic plan can still read a whole index, in key order, in place of a
// scan, or take an index that serves part of a condition, when the
// statistics it was made with (or their absence) make that look as cheap.
// So each statement leaves the planner one way to its rows: a condition no
// index should serve is written (…) IS TRUE; each item of an array finds
// its rows in a LATERAL subquery of its own (OFFSET 0 or a lock keeps it
// from being merged into a join); rows from a CTE reach a table's through
// a range of one key, which an index serves and no hash or merge join
// can. TestTaskLifeDoesNotReadTheBacklog plans the statements of a task's
// life on an empty table and on small ones, then adds a backlog.
//
// And it turns JIT compilation off. A scan made the last resort costs
// some 10^10 in the planner's units, far above jit_above_cost, so the few
// statements that must scan (the dead-instance check over
// retry_instances, the sums over the counts' rows) were compiled by LLVM
// at every run: some 30 ms of CPU for a statement that runs in 0.02 ms,
// four times a second per instance. No statement of the store reads
// enough rows for JIT to pay.
//
// And it makes PostgreSQL keep one generic plan per prepared statement.
// Left to choose, it kept planning the store's statements at every run:
// for a statement over parameter arrays (the create, claim and finish
// batches) a custom plan, which knows the arrays' lengths, looks cheaper
// than the generic one, so the choice never settled. Planning was about a
// tenth of the server's CPU per task; the generic plans are the same index
// lookups, since no scan is left to choose.
func poolConfig(url, schema string) (*pgxpool.Config, error) {
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w: %w", store.ErrInvalid, err)
	}
	pcfg.ConnConfig.RuntimeParams["enable_seqscan"] = "off"
	pcfg.ConnConfig.RuntimeParams["jit"] = "off"
	pcfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	if schema != "" {
		if !textOK(schema) {
			return nil, fmt.Errorf("postgres: schema %q: %w", schema, store.ErrInvalid)
		}
		pcfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	}
	return pcfg, nil
}

// channelName is the NOTIFY channel of the store in schema. Channels are
// the database's, not the schema's, so stores in two schemas of one
// database must not share one; names are cut to PostgreSQL's 63 bytes.
func channelName(schema string) string {
	name := "retrykit." + schema
	for len(name) > 63 {
		_, size := utf8.DecodeLastRuneInString(name)
		name = name[:len(name)-size]
	}
	return name
}

// Ping reports whether the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	if err := s.pool.Ping(ctx); err != nil {
		return s.fail("ping", err)
	}
	return nil
}

// Close closes the pool, waiting for the connections in use to be
// returned, and ends every Listen of the store. Later calls return
// store.ErrClosed; calling Close again returns nil.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.stop()
		s.pool.Close()
	})
	return nil
}

// fail wraps err from the operation op, as store.ErrClosed if the store
// was closed meanwhile.
func (s *Store) fail(op string, err error) error {
	if s.closed.Load() && !errors.Is(err, store.ErrClosed) {
		return fmt.Errorf("postgres: %s: %w", op, store.ErrClosed)
	}
	return fmt.Errorf("postgres: %s: %w", op, err)
}

// textOK reports whether every s can be a PostgreSQL text value: valid
// UTF-8 without NUL bytes. A lookup by a value that cannot be stored finds
// nothing; a write of one is store.ErrInvalid.
func textOK(ss ...string) bool {
	for _, s := range ss {
		if strings.IndexByte(s, 0) >= 0 || !utf8.ValidString(s) {
			return false
		}
	}
	return true
}

var _ store.Store = (*Store)(nil)
