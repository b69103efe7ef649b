package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/coalesce"
	"github.com/retrykit/retry/service/store/internal/linger"
)

// Defaults of Open's options.
const (
	DefaultPrefix        = "retryd:"
	DefaultPartitions    = 16
	MaxPartitions        = 1024
	DefaultAttemptLogCap = 1000
)

// Option changes how Open opens a store.
type Option func(*config)

type config struct {
	prefix        string
	partitions    int
	claim         []int
	logCap        int
	logger        *slog.Logger
	listenBackoff backoff.Policy
}

// WithPrefix sets the prefix of every key and channel of the store
// (DefaultPrefix when unset). Stores with other prefixes share a server
// without seeing each other. It must not contain '{' or '}'.
func WithPrefix(p string) Option { return func(c *config) { c.prefix = p } }

// WithPartitions sets the number of partitions, 1 to MaxPartitions. The
// first Open of a prefix records it; a later Open with another number
// fails, since tasks stay in the partition they were created in. 0 (the
// default) takes the recorded number, or DefaultPartitions for a new store.
func WithPartitions(n int) Option { return func(c *config) { c.partitions = n } }

// WithClaimPartitions makes the store claim tasks, and Listen hear
// wake-ups, in the partitions given only (by default, all of them), so that
// instances can split the partitions between them. Every other method
// still sees every partition. Store.Partition tells where tasks go.
func WithClaimPartitions(ps ...int) Option {
	return func(c *config) { c.claim = append([]int{}, ps...) } // not nil: an empty list is an error
}

// WithAttemptLogCap sets how many attempts a task's log keeps, the latest
// (DefaultAttemptLogCap when n < 1). Older entries are dropped.
func WithAttemptLogCap(n int) Option { return func(c *config) { c.logCap = n } }

// WithLogger sets where the store logs (slog.Default() when nil): the
// durability warning of Open and Listen's lost subscriptions.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithListenBackoff sets the delays between Listen's attempts to
// subscribe again after losing its subscription (by default exponential
// from 50ms to 5s, with full jitter).
func WithListenBackoff(p backoff.Policy) Option { return func(c *config) { c.listenBackoff = p } }

// Store is a store.Store on a Redis server or cluster. It is safe for
// concurrent use; see the package documentation for what it needs from
// the server.
type Store struct {
	rdb goredis.UniversalClient
	// oneServer says the server is not a Redis Cluster's node, so that
	// one script may touch keys of any slot (see createFast).
	oneServer atomic.Bool
	k         keys
	sc        scripts
	parts     int
	claim     []int
	logCap    int
	log       *slog.Logger
	listen    backoff.Policy
	locs      locCache
	turn      atomic.Uint64 // rotates which partition a fair claim serves first

	doneFilled atomic.Bool // the done sets are known complete (see backfillDone)
	// tenantCounted says the tenant counts are known complete (see
	// backfillTenantCounts).
	tenantCounted atomic.Bool

	creates *coalesce.Coalescer[*store.Task, store.CreateResult] // TaskCreate's batches

	// inst is the instance this Store is (store.Instances); sendMu makes
	// MaySend's callers wait for one write of the horizon.
	inst struct {
		sync.Mutex
		id     string
		sendTo int64 // the horizon written (ms); 0: nothing sent yet
	}
	sendMu sync.Mutex

	life      context.Context // cancelled by Close: ends every Listen
	stop      context.CancelFunc
	closed    atomic.Bool
	closeOnce sync.Once
}

// Open connects to the server at rawURL and returns a store in it. The URL
// is go-redis's (redis://[user:password@]host:port/db?options, rediss://
// for TLS, unix://path); the schemes redis+cluster:// and rediss+cluster://
// name one node of a Redis Cluster (more with addr=host:port options). ctx
// bounds the opening only. Open logs a warning when the server keeps no
// append-only file (see the package documentation).
func Open(ctx context.Context, rawURL string, opts ...Option) (*Store, error) {
	cfg := config{prefix: DefaultPrefix, listenBackoff: backoff.Policy{
		Kind: backoff.Exponential, Base: 50 * time.Millisecond, Max: 5 * time.Second}}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.logCap < 1 {
		cfg.logCap = DefaultAttemptLogCap
	}
	if cfg.logger == nil {
		cfg.logger = slog.Default()
	}
	where := redact(rawURL)
	if !validPrefix(cfg.prefix) {
		return nil, fmt.Errorf("redis: key prefix %q has a brace: %w", cfg.prefix, store.ErrInvalid)
	}
	if cfg.partitions < 0 || cfg.partitions > MaxPartitions {
		return nil, fmt.Errorf("redis: %d partitions, want 1 to %d: %w", cfg.partitions, MaxPartitions, store.ErrInvalid)
	}
	rdb, err := newClient(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redis: open %s: %w: %w", where, store.ErrInvalid, err)
	}
	s := &Store{rdb: rdb, sc: newScripts(), logCap: cfg.logCap, log: cfg.logger, listen: cfg.listenBackoff}
	s.creates = coalesce.New(coalesce.Config[*store.Task, store.CreateResult]{Run: s.createBatch, MaxRuns: createRuns,
		Linger: linger.Max})
	err = s.checkVersion(ctx)
	if err == nil {
		err = s.checkCluster(ctx)
	}
	if err == nil {
		err = s.setup(ctx, cfg)
	}
	if err != nil {
		rdb.Close()
		return nil, fmt.Errorf("redis: open %s: %w", where, err)
	}
	s.checkDurability(ctx, where)
	s.life, s.stop = context.WithCancel(context.Background())
	return s, nil
}

// newClient makes the go-redis client of rawURL. Its own retries are off:
// a script must not run twice because a reply was lost, and callers retry
// with their own policy (the scheduler does, with the library's backoff).
func newClient(rawURL string) (goredis.UniversalClient, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, withoutURL(err)
	}
	if scheme, ok := strings.CutSuffix(u.Scheme, "+cluster"); ok {
		u.Scheme = scheme
		o, err := goredis.ParseClusterURL(u.String())
		if err != nil {
			return nil, withoutURL(err)
		}
		o.MaxRetries, o.ContextTimeoutEnabled = -1, true
		return goredis.NewClusterClient(o), nil
	}
	o, err := goredis.ParseURL(rawURL)
	if err != nil {
		return nil, withoutURL(err)
	}
	o.MaxRetries, o.ContextTimeoutEnabled = -1, true
	return goredis.NewClient(o), nil
}

// withoutURL drops the URL a parse error quotes: it may hold a password, and
// the error reaches logs. What was wrong with it stays.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s URL: %w", ue.Op, ue.Err)
	}
	return err
}

// checkVersion refuses a server older than 7.0, whose Lua has no #!lua
// flags and whose SET has no NX GET. A server that hides its version
// (some managed ones) is given the benefit of the doubt.
func (s *Store) checkVersion(ctx context.Context) error {
	info, err := s.rdb.Info(ctx, "server").Result()
	if err != nil {
		return s.rdb.Ping(ctx).Err()
	}
	v := infoField(info, "redis_version")
	major, _, _ := strings.Cut(v, ".")
	if n, err := strconv.Atoi(major); err == nil && n < 7 {
		return fmt.Errorf("server version %s, the store needs 7.0 or later: %w", v, store.ErrInvalid)
	}
	return nil
}

// checkCluster sets oneServer unless the client is a cluster's or the
// server has cluster mode on (a node reached with a plain redis:// URL,
// as some proxies and managed services present one), where a script may
// touch only one slot.
func (s *Store) checkCluster(ctx context.Context) error {
	if _, cluster := s.rdb.(*goredis.ClusterClient); cluster {
		return nil
	}
	info, err := s.rdb.Info(ctx, "cluster").Result()
	if err != nil {
		return err
	}
	s.oneServer.Store(infoField(info, "cluster_enabled") != "1")
	return nil
}

// setup settles the number of partitions with the server and checks the
// partitions to claim from.
func (s *Store) setup(ctx context.Context, cfg config) error {
	want := cfg.partitions
	if want == 0 {
		want = DefaultPartitions
	}
	configKey := keys{prefix: cfg.prefix}.config() // the partitions are not known yet
	created, err := s.rdb.HSetNX(ctx, configKey, "partitions", want).Result()
	if err != nil {
		return err
	}
	if created {
		// A new store keeps its tenant counts from its first task on.
		if err := s.rdb.HSet(ctx, configKey, configTenantCounts, "1").Err(); err != nil {
			return err
		}
	}
	got, err := s.rdb.HGet(ctx, configKey, "partitions").Int()
	if err != nil {
		return err
	}
	if got < 1 || got > MaxPartitions {
		return fmt.Errorf("the store records %d partitions: %w", got, store.ErrInvalid)
	}
	if cfg.partitions != 0 && got != cfg.partitions {
		return fmt.Errorf("the store has %d partitions, not %d: %w", got, cfg.partitions, store.ErrConflict)
	}
	s.parts, s.k = got, newKeys(cfg.prefix, got)
	s.claim = cfg.claim
	if s.claim == nil {
		for p := range got {
			s.claim = append(s.claim, p)
		}
	}
	slices.Sort(s.claim)
	s.claim = slices.Compact(s.claim)
	if len(s.claim) == 0 || s.claim[0] < 0 || s.claim[len(s.claim)-1] >= got {
		return fmt.Errorf("claim partitions %v, want some of 0 to %d: %w", cfg.claim, got-1, store.ErrInvalid)
	}
	return nil
}

// checkDurability warns when the server would lose acknowledged changes on
// a restart. Managed servers may refuse INFO or CONFIG: then it says
// nothing.
func (s *Store) checkDurability(ctx context.Context, where string) {
	info, err := s.rdb.Info(ctx, "persistence").Result()
	if err != nil {
		return
	}
	if infoField(info, "aof_enabled") != "1" {
		s.log.Warn("redis: the server keeps no append-only file: a restart of Redis loses the tasks and policies "+
			"it holds; run it with appendonly yes (see the store's documentation)", "server", where)
		return
	}
	if fsync, err := s.rdb.ConfigGet(ctx, "appendfsync").Result(); err == nil && fsync["appendfsync"] == "no" {
		s.log.Warn("redis: the server's append-only file is never synced (appendfsync no): a crash of the machine "+
			"loses recent changes; use everysec or always", "server", where)
	}
}

func infoField(info, name string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

func redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// Partitions returns the number of partitions of the store.
func (s *Store) Partitions() int { return s.parts }

// ClaimPartitions returns the partitions this Store claims tasks from, in
// order; see WithClaimPartitions.
func (s *Store) ClaimPartitions() []int { return slices.Clone(s.claim) }

// Partition returns the partition the tasks of tenant with policyID go to.
func (s *Store) Partition(tenant, policyID string) int { return partitionOf(tenant, policyID, s.parts) }

func (s *Store) claims(p int) bool {
	_, ok := slices.BinarySearch(s.claim, p)
	return ok
}

// Ping reports whether the server answers.
func (s *Store) Ping(ctx context.Context) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return s.fail("ping", s.rdb.Ping(ctx).Err())
}

// Close closes the connections; later calls return store.ErrClosed, and
// Listen returns. Calling it again returns nil.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.stop()
		err = s.rdb.Close()
	})
	return err
}

// fail wraps err, nil staying nil, and names a closed client ErrClosed.
func (s *Store) fail(op string, err error) error {
	if err == nil {
		return nil
	}
	if s.closed.Load() || errors.Is(err, goredis.ErrClosed) {
		return fmt.Errorf("redis: %s: %w", op, store.ErrClosed)
	}
	return fmt.Errorf("redis: %s: %w", op, err)
}

// open returns ErrClosed once the store is closed.
func (s *Store) open(op string) error {
	if s.closed.Load() {
		return fmt.Errorf("redis: %s: %w", op, store.ErrClosed)
	}
	return nil
}

var _ store.Store = (*Store)(nil)
