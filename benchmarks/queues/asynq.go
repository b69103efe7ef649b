package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
	goredis "github.com/redis/go-redis/v9"
)

// asynqSystem is asynq on a queue of its own.
type asynqSystem struct {
	client  *asynq.Client
	server  *asynq.Server
	inspect *asynq.Inspector
	opt     asynq.RedisClientOpt
	queue   string
}

func newAsynq(_ context.Context, c config, base string) (*asynqSystem, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	queue := "queues-asynq-" + hex.EncodeToString(b[:])
	opt := asynq.RedisClientOpt{Addr: c.redis}
	s := &asynqSystem{client: asynq.NewClient(opt), inspect: asynq.NewInspector(opt), opt: opt, queue: queue}
	s.server = asynq.NewServer(opt, asynq.Config{
		Concurrency:              c.workers,
		Queues:                   map[string]int{queue: 1},
		TaskCheckInterval:        time.Millisecond,
		DelayedTaskCheckInterval: time.Millisecond,
		LogLevel:                 asynq.FatalLevel,
	})
	hc := workerClient(c.workers)
	mux := asynq.NewServeMux()
	mux.HandleFunc("post", func(ctx context.Context, t *asynq.Task) error {
		if len(t.Payload()) != 8 {
			return fmt.Errorf("payload of %d bytes", len(t.Payload()))
		}
		return post(ctx, hc, base, int(binary.BigEndian.Uint64(t.Payload())))
	})
	if err := s.server.Start(mux); err != nil {
		s.client.Close()
		return nil, fmt.Errorf("asynq: start: %w", err)
	}
	return s, nil
}

func (s *asynqSystem) insert(ctx context.Context, i int) error {
	p := binary.BigEndian.AppendUint64(nil, uint64(i))
	_, err := s.client.EnqueueContext(ctx, asynq.NewTask("post", p), asynq.Queue(s.queue))
	return err
}

// done counts the processed tasks: asynq keeps no completed task by
// default, only the count.
func (s *asynqSystem) done(context.Context) (int, error) {
	q, err := s.inspect.GetQueueInfo(s.queue)
	if err != nil {
		return 0, fmt.Errorf("asynq: queue info: %w", err)
	}
	return q.Processed - q.Failed, nil
}

// close stops asynq and removes its queue, with the processed and failed
// counts DeleteQueue leaves behind (all of the queue's keys share its tag).
func (s *asynqSystem) close() {
	s.server.Shutdown()
	_ = s.inspect.DeleteQueue(s.queue, true)
	s.inspect.Close()
	s.client.Close()
	if rdb, ok := s.opt.MakeRedisClient().(goredis.UniversalClient); ok {
		ctx := context.Background()
		iter := rdb.Scan(ctx, 0, "asynq:{"+s.queue+"}:*", 100).Iterator()
		for iter.Next(ctx) {
			_ = rdb.Del(ctx, iter.Val()).Err()
		}
		rdb.Close()
	}
}
