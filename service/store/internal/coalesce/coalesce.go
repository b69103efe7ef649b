// Package coalesce turns concurrent calls of one item each into calls of a
// batch: a call that finds fewer than Config.MaxRuns batches under way
// starts one, with every item waiting then; a call that finds them all
// busy queues its item for the next batch, which starts as soon as one of
// them ends. So a lone caller pays one round trip, and under load the
// batches grow by themselves to share a store's commits (the group commit
// of databases). With Config.Linger, a batch started while the store is
// busy first waits a little for as many items as recent batches held (see
// package linger).
package coalesce

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/retrykit/retry/service/store/internal/linger"
)

// Func runs one batch: out[i] is the outcome of in[i]. An error fails every
// item of the batch.
type Func[In, Out any] func(ctx context.Context, in []In) (out []Out, err error)

// Config sets up a Coalescer.
type Config[In, Out any] struct {
	Run      Func[In, Out]
	MaxItems int // the largest batch; ≤ 0 means 1,000
	MaxRuns  int // batches under way at once; ≤ 0 means 1
	// Linger is the longest a batch waits for more items (see package
	// linger); 0 never waits. With MaxRuns above 1, batches starting
	// together share the record of recent ones.
	Linger time.Duration
}

// Coalescer gathers the items of concurrent Do calls into batches. Create
// it with New; it is safe for concurrent use.
type Coalescer[In, Out any] struct {
	cfg Config[In, Out]

	mu      sync.Mutex
	queue   []*waiter[In, Out]
	running int
	gather  linger.Gather
	// arrived has a value once an item has queued since a lingering
	// batch last looked.
	arrived chan struct{}
}

type waiter[In, Out any] struct {
	ctx  context.Context
	in   In
	out  Out
	err  error
	done chan struct{}
}

// New returns a Coalescer that runs batches with cfg.Run.
func New[In, Out any](cfg Config[In, Out]) *Coalescer[In, Out] {
	if cfg.MaxItems <= 0 {
		cfg.MaxItems = 1000
	}
	if cfg.MaxRuns <= 0 {
		cfg.MaxRuns = 1
	}
	return &Coalescer[In, Out]{cfg: cfg, arrived: make(chan struct{}, 1)}
}

// Do runs in as part of a batch and returns its outcome. When ctx ends
// before the item's batch has started, the item is dropped and Do returns
// ctx's error; once started, a batch runs to its end whatever happens to
// ctx (its context is the starting caller's, without its cancellation).
// A caller that finds a run slot free runs the next batch itself, its own
// item among it, and returns when that batch ends; otherwise Do returns
// as soon as ctx ends, the item's outcome then unknown to the caller, as
// with any call cut short.
func (c *Coalescer[In, Out]) Do(ctx context.Context, in In) (Out, error) {
	w := &waiter[In, Out]{ctx: ctx, in: in, done: make(chan struct{})}
	c.mu.Lock()
	c.queue = append(c.queue, w)
	if c.cfg.Linger > 0 {
		select {
		case c.arrived <- struct{}{}:
		default:
		}
	}
	lead := c.running < c.cfg.MaxRuns
	if lead {
		c.running++
	}
	c.mu.Unlock()
	if lead {
		// A lone caller runs its own batch on its own goroutine: a hand-off
		// would cost more than the work. Items that queued meanwhile are
		// left to a goroutine, which holds the run slot until the queue is
		// empty.
		bctx := context.WithoutCancel(ctx)
		if batch, waited, short := c.next(); len(batch) > 0 {
			c.run(bctx, batch, waited, short)
		}
		c.mu.Lock()
		more := len(c.queue) > 0
		if !more {
			c.running--
		}
		c.mu.Unlock()
		if more {
			go c.lead(bctx)
		}
	}
	select {
	case <-w.done:
		return w.out, w.err
	case <-ctx.Done():
		var zero Out
		return zero, context.Cause(ctx)
	}
}

// lead runs batches while items wait, then gives its run slot back.
func (c *Coalescer[In, Out]) lead(ctx context.Context) {
	for {
		batch, waited, short := c.next()
		if len(batch) == 0 {
			c.mu.Lock()
			if len(c.queue) == 0 {
				c.running--
				c.mu.Unlock()
				return
			}
			c.mu.Unlock()
			continue
		}
		c.run(ctx, batch, waited, short)
	}
}

// next takes the next batch, after lingering for more items if the record
// of recent batches says to; waited reports that it did, short that the
// wait ran out first.
func (c *Coalescer[In, Out]) next() (batch []*waiter[In, Out], waited, short bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cfg.Linger > 0 {
		if wait, want := c.gather.Wait(len(c.queue), c.cfg.Linger); wait > 0 {
			c.mu.Unlock()
			short = c.await(wait, want)
			c.mu.Lock()
			waited = true
		}
	}
	return c.take(), waited, short
}

// await waits up to d for the queue to hold want items, and reports
// whether d ran out first. c.mu is not held.
func (c *Coalescer[In, Out]) await(d time.Duration, want int) (short bool) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case <-c.arrived:
			c.mu.Lock()
			n := len(c.queue)
			c.mu.Unlock()
			if n >= want {
				return false
			}
		case <-timer.C:
			return true
		}
	}
}

// take removes the next batch from the queue, leaving out items whose
// callers have gone. c.mu is held.
func (c *Coalescer[In, Out]) take() []*waiter[In, Out] {
	var batch []*waiter[In, Out]
	n := 0
	for n < len(c.queue) && len(batch) < c.cfg.MaxItems {
		w := c.queue[n]
		n++
		if w.ctx.Err() != nil {
			continue // Do has returned
		}
		batch = append(batch, w)
	}
	clear(c.queue[:n])
	c.queue = c.queue[n:]
	return batch
}

// run runs batch and answers its items; waited and short are next's.
func (c *Coalescer[In, Out]) run(ctx context.Context, batch []*waiter[In, Out], waited, short bool) {
	began := time.Now()
	defer func() {
		c.mu.Lock()
		c.gather.Committed(began, len(batch), waited, short)
		c.mu.Unlock()
	}()
	in := make([]In, len(batch))
	for i, w := range batch {
		in[i] = w.in
	}
	out, err := c.cfg.Run(ctx, in)
	if err == nil && len(out) != len(in) {
		err = fmt.Errorf("coalesce: a batch of %d items answered %d outcomes", len(in), len(out))
	}
	for i, w := range batch {
		if err != nil {
			w.err = err
		} else {
			w.out = out[i]
		}
		close(w.done)
	}
}
