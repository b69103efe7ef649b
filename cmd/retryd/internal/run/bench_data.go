package run

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/retrykit/retry/service/destination/secrets"
)

// benchStore is the store the bench was told to use, and the folder of
// its own where SQLite files and retryd logs go.
type benchStore struct {
	kind       string // sqlite, postgres or redis
	url        string // postgres:// or redis:// URL; "" for sqlite
	where      string // for the report: without secrets
	durability string // for the report: what a commit survives
	dir        string
	ownDir     bool // dir was made by the bench: removed at the end unless a run failed
}

// benchStoreKind checks a bench --store value: "sqlite" (new files in the
// bench's folder), or a postgres:// or redis:// URL. A SQLite path is
// refused because every run needs fresh data: --dir picks the folder.
func benchStoreKind(spec string) (string, error) {
	if spec == "sqlite" {
		return "sqlite", nil
	}
	kind, err := storeKind(spec)
	switch {
	case err != nil:
		return "", err
	case kind == "sqlite":
		return "", fmt.Errorf("--store %q: the bench makes a new SQLite file per run; give --store sqlite and --dir for the folder", spec)
	case kind == "redis" && strings.Contains(spec, "+cluster://"):
		return "", errors.New("--store: the bench does not support Redis Cluster URLs (it cleans up with SCAN on one server)")
	}
	return kind, nil
}

// openBenchStore makes the bench's folder and, for a server, checks that
// it answers and reads how durable its commits are.
func openBenchStore(ctx context.Context, c benchConfig) (*benchStore, error) {
	kind, err := benchStoreKind(c.store)
	if err != nil {
		return nil, usageError{err}
	}
	bs := &benchStore{kind: kind}
	if kind != "sqlite" {
		bs.url = c.store
		if bs.where, err = redactURL(c.store); err != nil {
			return nil, err
		}
	}
	if c.dir != "" {
		if err := os.MkdirAll(c.dir, 0o755); err != nil {
			return nil, fmt.Errorf("--dir: %w", err)
		}
	}
	if bs.dir, err = os.MkdirTemp(c.dir, "retryd-bench-"); err != nil {
		return nil, fmt.Errorf("bench folder: %w", err)
	}
	bs.ownDir = true
	ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	switch kind {
	case "sqlite":
		bs.where = "sqlite, a new file per run in " + bs.dir + fileSystem(bs.dir)
		bs.durability = "WAL, synchronous=FULL (an fsync per commit), group commit"
	case "postgres":
		bs.durability, err = postgresDurability(ictx, bs.url)
	case "redis":
		bs.durability, err = redisDurability(ictx, bs.url)
	}
	if err != nil {
		bs.close(true)
		return nil, err
	}
	return bs, nil
}

// close removes the bench's folder, if it made it and clean says to.
func (bs *benchStore) close(clean bool) {
	if bs.ownDir && clean {
		os.RemoveAll(bs.dir)
	}
}

// benchData is one run's fresh data: a new SQLite file, PostgreSQL schema
// or Redis key prefix.
type benchData struct {
	bs     *benchStore
	store  string // --store for retryd
	schema string
	prefix string
	// keyFile is --secrets-key-file: every instance of a run on a shared
	// store seals with the same key.
	keyFile string
}

// fresh makes new, empty data for the run called name.
func (bs *benchStore) fresh(ctx context.Context, name string) (*benchData, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("random name: %w", err)
	}
	id := hex.EncodeToString(b[:])
	d := &benchData{bs: bs, store: bs.url, keyFile: filepath.Join(bs.dir, name+"-"+id+".key")}
	if _, _, err := secrets.EnsureKeyFile(d.keyFile); err != nil {
		return nil, err
	}
	switch bs.kind {
	case "sqlite":
		d.store = filepath.Join(bs.dir, name+"-"+id+".db")
	case "postgres":
		d.schema = "retryd_bench_" + id
		if err := pgExec(ctx, bs.url, "CREATE SCHEMA "+d.schema); err != nil {
			return nil, fmt.Errorf("create schema %s: %w", d.schema, err)
		}
	case "redis":
		d.prefix = "retryd-bench-" + id + ":"
	}
	return d, nil
}

// config is the store part of a retryd Config for d.
func (d *benchData) config() Config {
	return Config{Store: d.store, Schema: d.schema, Prefix: d.prefix, SecretsConfig: SecretsConfig{SecretsKeyFile: d.keyFile}}
}

// args are the store flags of retryd serve for d.
func (d *benchData) args() []string {
	a := []string{"--store", d.store, "--secrets-key-file", d.keyFile}
	if d.schema != "" {
		a = append(a, "--schema", d.schema)
	}
	if d.prefix != "" {
		a = append(a, "--prefix", d.prefix)
	}
	return a
}

// drop deletes d's schema or keys. SQLite files go with the bench's folder.
func (d *benchData) drop() error {
	// Cleaning up must happen even when the bench was interrupted.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	switch {
	case d.schema != "":
		if err := pgExec(ctx, d.bs.url, "DROP SCHEMA "+d.schema+" CASCADE"); err != nil {
			return fmt.Errorf("drop schema %s: %w", d.schema, err)
		}
	case d.prefix != "":
		if err := redisUnlinkPrefix(ctx, d.bs.url, d.prefix); err != nil {
			return fmt.Errorf("delete the keys %s*: %w", d.prefix, err)
		}
	}
	return nil
}

// pgConnect opens one connection to the store at url, which may carry
// pgxpool's settings (pool_max_conns and the like) as retryd's --store
// does: pgx.Connect alone would send them to the server as parameters,
// which it refuses.
func pgConnect(ctx context.Context, url string) (*pgx.Conn, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	return pgx.ConnectConfig(ctx, cfg.ConnConfig)
}

func pgExec(ctx context.Context, url, sql string) error {
	conn, err := pgConnect(ctx, url)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

// postgresDurability reads the settings a commit's durability rests on.
func postgresDurability(ctx context.Context, url string) (string, error) {
	conn, err := pgConnect(ctx, url)
	if err != nil {
		return "", fmt.Errorf("--store: connect to PostgreSQL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var version, fsync, syncCommit string
	for _, q := range []struct {
		name string
		v    *string
	}{{"server_version", &version}, {"fsync", &fsync}, {"synchronous_commit", &syncCommit}} {
		if err := conn.QueryRow(ctx, "SHOW "+q.name).Scan(q.v); err != nil {
			return "", fmt.Errorf("--store: SHOW %s: %w", q.name, err)
		}
	}
	return fmt.Sprintf("PostgreSQL %s, fsync=%s, synchronous_commit=%s", version, fsync, syncCommit), nil
}

func redisClient(url string) (*goredis.Client, error) {
	opts, err := goredis.ParseURL(url)
	if err != nil {
		return nil, usageError{errors.New("--store: not a valid Redis URL")}
	}
	return goredis.NewClient(opts), nil
}

// redisDurability reads the persistence settings: without appendonly, an
// acknowledged task does not survive a restart of Redis.
func redisDurability(ctx context.Context, url string) (string, error) {
	c, err := redisClient(url)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		return "", fmt.Errorf("--store: Redis: %w", err)
	}
	var parts []string
	if info, err := c.InfoMap(ctx, "server").Result(); err == nil {
		parts = append(parts, "Redis "+info["Server"]["redis_version"])
	}
	for _, name := range []string{"appendonly", "appendfsync", "save"} {
		v, err := c.ConfigGet(ctx, name).Result()
		if err != nil {
			parts = append(parts, name+"=unknown (CONFIG GET refused)")
			continue
		}
		parts = append(parts, fmt.Sprintf("%s=%q", name, v[name]))
	}
	return strings.Join(parts, ", "), nil
}

// redisUnlinkPrefix deletes every key starting with prefix (SCAN and
// UNLINK, never a FLUSH: the server may hold other data).
func redisUnlinkPrefix(ctx context.Context, url, prefix string) error {
	c, err := redisClient(url)
	if err != nil {
		return err
	}
	defer c.Close()
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var keys []string
	flush := func() error {
		if len(keys) == 0 {
			return nil
		}
		err := c.Unlink(ctx, keys...).Err()
		keys = keys[:0]
		return err
	}
	for iter.Next(ctx) {
		if keys = append(keys, iter.Val()); len(keys) == 500 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return errors.Join(iter.Err(), flush())
}
