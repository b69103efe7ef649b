package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// system is a queue under test.
type system interface {
	// insert enqueues task i, a POST to the target naming i.
	insert(ctx context.Context, i int) error
	// done reports how many tasks the system has recorded as done.
	done(ctx context.Context) (int, error)
	close()
}

// result is what measure saw.
type result struct {
	total, inserts time.Duration
	p50, p99, max  time.Duration
}

// measure enqueues c.tasks tasks from c.clients goroutines, one at a time
// each, then waits until the target has answered every one and the system
// has recorded every one done.
func measure(ctx context.Context, c config, sys system, tg *target) (result, error) {
	lat := make([]time.Duration, c.tasks)
	var next atomic.Int64
	var firstErr error
	var errOnce sync.Once
	start := time.Now()
	var wg sync.WaitGroup
	for range c.clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= c.tasks || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				if err := sys.insert(ctx, i); err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("insert %d: %w", i, err) })
					return
				}
				lat[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	inserts := time.Since(start)
	if firstErr != nil {
		return result{}, firstErr
	}
	for {
		if tg.distinct() >= c.tasks {
			n, err := sys.done(ctx)
			if err != nil {
				return result{}, err
			}
			if n >= c.tasks {
				break
			}
		}
		select {
		case <-ctx.Done():
			return result{}, fmt.Errorf("after %v: the target answered %d of %d tasks: %w", time.Since(start), tg.distinct(), c.tasks, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
	total := time.Since(start)
	slices.Sort(lat)
	q := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	return result{total: total, inserts: inserts, p50: q(0.5), p99: q(0.99), max: lat[len(lat)-1]}, nil
}

// target answers 200 to every POST /task/<i>, counting what it sees.
type target struct {
	url  string
	srv  *http.Server
	seen []atomic.Int32 // per task
	n    atomic.Int64   // distinct tasks seen
	dups atomic.Int64
}

func startTarget(tasks int) (*target, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	t := &target{url: "http://" + ln.Addr().String() + "/task/", seen: make([]atomic.Int32, tasks)}
	t.srv = &http.Server{Handler: t, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = t.srv.Serve(ln) }()
	return t, nil
}

func (t *target) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	i, err := strconv.Atoi(r.URL.Path[len("/task/"):])
	if err != nil || i < 0 || i >= len(t.seen) {
		http.Error(w, "no such task", http.StatusNotFound)
		return
	}
	if t.seen[i].Add(1) == 1 {
		t.n.Add(1)
	} else {
		t.dups.Add(1)
	}
}

func (t *target) distinct() int     { return int(t.n.Load()) }
func (t *target) duplicates() int64 { return t.dups.Load() }
func (t *target) close()            { _ = t.srv.Close() }

// post is what a worker of either system does for task i: one POST to the
// target, with Go's client, as their users' workers do; an answer other
// than 200 fails the task.
func post(ctx context.Context, hc *http.Client, base string, i int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+strconv.Itoa(i), nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("target answered %d", resp.StatusCode)
	}
	return nil
}

// workerClient is the HTTP client the workers share: keep-alive
// connections, as many as there are workers.
func workerClient(workers int) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		Proxy: nil, MaxIdleConnsPerHost: workers, MaxConnsPerHost: workers, IdleConnTimeout: time.Minute,
	}}
}
