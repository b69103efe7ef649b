package run

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// task is the create body of task i.
func (r *apiRun) task(i int) benchTask {
	return benchTask{TargetURL: r.url, PolicyID: benchPolicyID, IdempotencyKey: r.keys[i], Body: r.body(i)}
}

// body is task i's body: {"n":i}, or with --body-size that many bytes,
// task i's index first so that no two tasks share a blob (the blob
// store is content-addressed), then r.pad.
func (r *apiRun) body(i int) string {
	small := `{"n":` + strconv.Itoa(i) + `}`
	if r.c.bodySize <= 0 {
		return small
	}
	return (small + " " + r.pad)[:r.c.bodySize]
}

// clients runs r.c.clients goroutines, each with its own connection,
// calling work with it until work returns false.
func (r *apiRun) clients(work func(c *apiClient) bool) {
	var wg sync.WaitGroup
	for range r.c.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newAPIClient(r.proc.addr, r.c.client)
			defer c.close()
			for work(c) {
			}
		}()
	}
	wg.Wait()
}

// create sends task i's POST /retry-tasks and records its answer.
func (r *apiRun) create(ctx context.Context, c *apiClient, i int) {
	body, err := json.Marshal(r.task(i))
	if err != nil {
		r.errs.add("encode task %d: %v", i, err)
		return
	}
	t0 := time.Now()
	r.sent[i] = r.tg.now()
	status, resp, err := c.do(ctx, http.MethodPost, "/retry-tasks", body)
	r.lat[i] = time.Since(t0)
	if err != nil {
		r.code[i] = codeNoAnswer
		r.errs.add("create %s: %v", r.keys[i], err)
		return
	}
	r.code[i] = int32(status)
	if status != http.StatusCreated {
		r.errs.add("create %s: answered %d: %s", r.keys[i], status, resp)
	}
}

// driveSingle creates every task, one POST /retry-tasks at a time per
// client, as fast as the answers come.
func driveSingle(ctx context.Context, r *apiRun) error {
	r.lat = make([]time.Duration, r.n)
	var next atomic.Int64
	r.clients(func(c *apiClient) bool {
		i := int(next.Add(1)) - 1
		if i >= r.n || ctx.Err() != nil {
			return false
		}
		r.create(ctx, c, i)
		return true
	})
	return ctx.Err()
}

// pacedDriver creates the tasks at rate a second, the i-th at i/rate after
// the start whichever client is free; a client still busy makes its next
// create late, which the report tells.
func pacedDriver(rate int) driver {
	return func(ctx context.Context, r *apiRun) error {
		r.lat = make([]time.Duration, r.n)
		var next atomic.Int64
		start, base := time.Now(), r.tg.now()
		slot := func(i int) time.Duration { return time.Duration(float64(i) * float64(time.Second) / float64(rate)) }
		r.clients(func(c *apiClient) bool {
			i := int(next.Add(1)) - 1
			if i >= r.n || ctx.Err() != nil {
				return false
			}
			at := start.Add(slot(i))
			select {
			case <-ctx.Done():
				return false
			case <-time.After(time.Until(at)):
			}
			r.create(ctx, c, i)
			return true
		})
		for i, sent := range r.sent {
			if r.code[i] != 0 { // sent
				r.behind = append(r.behind, max(0, time.Duration(sent-base)-slot(i)))
			}
		}
		return ctx.Err()
	}
}

// probeBatch asks for an empty batch: a 404 or 405 says this retryd has
// no batch endpoint (any other answer, 400 for an empty batch included,
// says it has).
func probeBatch(ctx context.Context, r *apiRun) (string, error) {
	status, _, err := r.mon.do(ctx, http.MethodPost, "/retry-tasks/batch", []byte(`{"tasks":[]}`))
	if err != nil {
		return "", fmt.Errorf("probe POST /retry-tasks/batch: %w", err)
	}
	if status == http.StatusNotFound || status == http.StatusMethodNotAllowed {
		return fmt.Sprintf("POST /retry-tasks/batch answered %d: this build has no batch endpoint", status), nil
	}
	return "", nil
}

// driveBatch creates every task in POST /retry-tasks/batch requests of
// r.c.batch tasks, one request at a time per client.
func driveBatch(ctx context.Context, r *apiRun) error {
	size := r.c.batch
	batches := (r.n + size - 1) / size
	r.lat = make([]time.Duration, batches)
	var next atomic.Int64
	r.clients(func(c *apiClient) bool {
		b := int(next.Add(1)) - 1
		if b >= batches || ctx.Err() != nil {
			return false
		}
		r.createBatch(ctx, c, b, b*size, min(r.n, (b+1)*size))
		return true
	})
	return ctx.Err()
}

// createBatch sends tasks lo to hi-1 in one batch request and records
// each item's answer.
func (r *apiRun) createBatch(ctx context.Context, c *apiClient, b, lo, hi int) {
	req := struct {
		Tasks []benchTask `json:"tasks"`
	}{make([]benchTask, 0, hi-lo)}
	for i := lo; i < hi; i++ {
		req.Tasks = append(req.Tasks, r.task(i))
	}
	body, err := json.Marshal(req)
	if err != nil {
		r.errs.add("encode batch %d: %v", b, err)
		return
	}
	t0 := time.Now()
	sent := r.tg.now()
	status, resp, err := c.do(ctx, http.MethodPost, "/retry-tasks/batch", body)
	r.lat[b] = time.Since(t0)
	for i := lo; i < hi; i++ {
		r.sent[i] = sent
		r.code[i] = codeNoAnswer
	}
	if err != nil {
		r.errs.add("batch %d: %v", b, err)
		return
	}
	if status != http.StatusOK {
		r.errs.add("batch %d: answered %d: %s", b, status, bytes.TrimSpace(resp))
		for i := lo; i < hi; i++ {
			r.code[i] = int32(status)
		}
		return
	}
	var ans batchAnswer
	if err := json.Unmarshal(resp, &ans); err != nil || len(ans.Items) != hi-lo {
		r.errs.add("batch %d: answer with %d items for %d tasks (%v): %.200s", b, len(ans.Items), hi-lo, err, resp)
		return
	}
	for k, it := range ans.Items {
		r.code[lo+k] = int32(it.Status)
		if it.Status != http.StatusCreated {
			msg := ""
			if it.Error != nil {
				msg = it.Error.Code + ": " + it.Error.Message + " (" + it.Error.Field + ")"
			}
			r.errs.add("batch %d: %s answered %d %s", b, r.keys[lo+k], it.Status, msg)
		}
	}
}
