package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// postArgs is a River job: POST task N to the target.
type postArgs struct {
	N int `json:"n"`
}

func (postArgs) Kind() string { return "post" }

type postWorker struct {
	river.WorkerDefaults[postArgs]
	hc   *http.Client
	base string
}

func (w *postWorker) Work(ctx context.Context, job *river.Job[postArgs]) error {
	return post(ctx, w.hc, w.base, job.Args.N)
}

// riverSystem is River on a schema of its own.
type riverSystem struct {
	pool   *pgxpool.Pool
	client *river.Client[pgx.Tx]
	schema string
}

func newRiver(ctx context.Context, c config, base string) (*riverSystem, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "queues_river_" + hex.EncodeToString(b[:])
	pool, err := pgxpool.New(ctx, c.pg)
	if err != nil {
		return nil, fmt.Errorf("river: %w", err)
	}
	s := &riverSystem{pool: pool, schema: schema}
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("river: create schema: %w", err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: schema, Logger: quiet})
	if err == nil {
		_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	}
	if err != nil {
		s.close()
		return nil, fmt.Errorf("river: migrate: %w", err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &postWorker{hc: workerClient(c.workers), base: base})
	s.client, err = river.NewClient(riverpgxv5.New(pool), &river.Config{
		Schema:            schema,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: c.workers}},
		Workers:           workers,
		FetchCooldown:     time.Millisecond,
		FetchPollInterval: time.Millisecond,
		Logger:            quiet,
	})
	if err == nil {
		err = s.client.Start(ctx)
	}
	if err != nil {
		s.close()
		return nil, fmt.Errorf("river: start: %w", err)
	}
	return s, nil
}

func (s *riverSystem) insert(ctx context.Context, i int) error {
	_, err := s.client.Insert(ctx, postArgs{N: i}, nil)
	return err
}

// done counts the completed jobs: River records a job's completion in
// batches, after its Work returned.
func (s *riverSystem) done(ctx context.Context) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, "SELECT count(*) FROM "+s.schema+".river_job WHERE state = 'completed'").Scan(&n)
	return n, err
}

func (s *riverSystem) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if s.client != nil {
		_ = s.client.Stop(ctx)
	}
	_, _ = s.pool.Exec(ctx, "DROP SCHEMA "+s.schema+" CASCADE")
	s.pool.Close()
}
