package kafkaretry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// RetryFetchMaxWait is how long the retry consumer lets a broker hold a fetch
// open for new records (kgo.FetchMaxWait; Config.ClientOpts may override
// it). A partition resumed after a held record is fetched again only once
// the fetch in flight returns, so this bounds how late the records behind a
// held one can be; the main consumer keeps franz-go's default.
const RetryFetchMaxWait = 250 * time.Millisecond

// commitTimeout bounds the final commit of a stopping consumer, whose own
// context has already ended.
const commitTimeout = 10 * time.Second

// loop is one consumer: of the main topic, or of the retry topics. One
// goroutine runs it; the rebalance callbacks, which franz-go runs between
// polls (BlockRebalanceOnPoll), share its state under mu.
type loop struct {
	p     *Processor
	cl    *kgo.Client
	retry bool // the retry consumer: records carry a state and may be held

	mu      sync.Mutex
	queues  map[tp][]item      // fetched, not yet done; non-empty means paused
	pending map[tp]*kgo.Record // last record done per partition, not yet committed
	held    int                // records in queues, as last added to the gauge
}

type tp struct {
	topic     string
	partition int32
}

// item is a fetched record with what admit made of its headers.
type item struct {
	rec     *kgo.Record
	st      State
	due     time.Time // zero: now
	observe bool      // due is the record's own x-process-after: measure lateness
}

func newLoop(p *Processor, retry bool) (*loop, error) {
	l := &loop{p: p, retry: retry, queues: make(map[tp][]item), pending: make(map[tp]*kgo.Record)}
	group, topics := p.cfg.Group, []string{p.cfg.Topic}
	if retry {
		group, topics = group+"-retry", p.retryTopics
	}
	opts := []kgo.Opt{
		kgo.RecordDeliveryTimeout(30 * time.Second),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}
	if retry {
		// A resumed partition joins the fetches only once the fetch in
		// flight returns, so the broker's long-poll bounds how late a
		// record behind a held one is fetched.
		opts = append(opts, kgo.FetchMaxWait(RetryFetchMaxWait))
	}
	opts = append(opts, p.cfg.ClientOpts...)
	opts = append(opts,
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topics...),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
			l.drop(ctx, cl, m, true)
		}),
		kgo.OnPartitionsLost(func(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
			l.drop(ctx, cl, m, false)
		}),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafkaretry: %w", err)
	}
	l.cl = cl
	return l, nil
}

// run polls, handles what is due, holds the rest and commits, until ctx
// ends. While records are held, one goroutine waits for the earliest due
// time and cuts the poll short then; no goroutine waits per record.
func (l *loop) run(ctx context.Context) error {
	defer l.stop(ctx)
	for {
		l.mu.Lock()
		next, holding := l.nextDue()
		l.mu.Unlock()
		pollCtx, wake := context.WithCancel(ctx)
		if holding {
			go func() {
				if l.p.clock.Sleep(pollCtx, next.Sub(l.p.clock.Now())) == nil {
					wake()
				}
			}()
		}
		fetches := l.cl.PollRecords(pollCtx, l.p.cfg.MaxPollRecords)
		wake()
		if ctx.Err() != nil {
			l.cl.AllowRebalance()
			return nil
		}
		if fetches.IsClientClosed() {
			return errors.New("kafkaretry: client closed")
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			if !errors.Is(err, context.Canceled) {
				l.p.log.Warn("kafkaretry: fetch failed", "topic", topic, "partition", partition, "error", err)
			}
		})

		l.mu.Lock()
		now := l.p.clock.Now()
		fetches.EachPartition(func(f kgo.FetchTopicPartition) {
			key := tp{f.Topic, f.Partition}
			for _, r := range f.Records {
				l.queues[key] = append(l.queues[key], l.admit(r, now))
			}
		})
		err := l.drain(ctx)
		l.commit(ctx)
		l.mu.Unlock()
		l.cl.AllowRebalance()
		if err != nil && ctx.Err() == nil {
			return err // ProducePolicy gave up on a forward
		}
		if err != nil {
			return nil // ctx ended during a handling
		}
	}
}

func (l *loop) admit(r *kgo.Record, now time.Time) item {
	if !l.retry {
		return item{rec: r}
	}
	return l.p.admit(r, now)
}

// drain handles, per partition and in offset order, every queued record that
// is due, and pauses the partitions left with records to hold. It returns an
// error only when ctx ended.
func (l *loop) drain(ctx context.Context) error {
	defer l.countHeld()
	pause := make(map[string][]int32)
	resume := make(map[string][]int32)
	defer func() {
		// Called with nothing, these would only list what is paused.
		if len(pause) > 0 {
			l.cl.PauseFetchPartitions(pause)
		}
		if len(resume) > 0 {
			l.cl.ResumeFetchPartitions(resume)
		}
	}()
	for key, items := range l.queues {
		for len(items) > 0 {
			if items[0].due.After(l.p.clock.Now()) {
				break
			}
			if err := l.p.handle(ctx, l.cl, items[0]); err != nil {
				l.queues[key] = items
				return err
			}
			l.pending[key] = items[0].rec
			items[0] = item{}
			items = items[1:]
		}
		if len(items) == 0 {
			delete(l.queues, key)
			resume[key.topic] = append(resume[key.topic], key.partition)
			continue
		}
		l.queues[key] = items
		pause[key.topic] = append(pause[key.topic], key.partition)
	}
	return nil
}

// nextDue returns the earliest due time of a held record.
func (l *loop) nextDue() (time.Time, bool) {
	var next time.Time
	for _, items := range l.queues {
		if d := items[0].due; next.IsZero() || d.Before(next) {
			next = d
		}
	}
	return next, len(l.queues) > 0
}

// commit commits the last record done of each partition; on failure it
// keeps them for the next try.
func (l *loop) commit(ctx context.Context) {
	if len(l.pending) == 0 {
		return
	}
	recs := make([]*kgo.Record, 0, len(l.pending))
	for _, r := range l.pending {
		recs = append(recs, r)
	}
	if err := l.cl.CommitRecords(ctx, recs...); err != nil {
		l.p.log.Warn("kafkaretry: commit failed; will try again", "group", l.group(), "error", err)
		return
	}
	clear(l.pending)
}

// drop forgets revoked or lost partitions: their held records (the next
// owner fetches them again from the committed offset) and their pauses. A
// revoke first commits what is done; a loss cannot.
func (l *loop) drop(ctx context.Context, cl *kgo.Client, m map[string][]int32, commit bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var done []*kgo.Record
	for t, ps := range m {
		for _, p := range ps {
			key := tp{t, p}
			if r := l.pending[key]; r != nil && commit {
				done = append(done, r)
			}
			delete(l.pending, key)
			delete(l.queues, key)
		}
	}
	cl.ResumeFetchPartitions(m)
	l.countHeld()
	if len(done) > 0 {
		if err := cl.CommitRecords(ctx, done...); err != nil {
			l.p.log.Warn("kafkaretry: commit on revoke failed", "group", l.group(), "error", err)
		}
	}
}

// stop commits what is done and lets go of held records.
func (l *loop) stop(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.commit(ctx)
	clear(l.queues)
	l.countHeld()
}

// countHeld brings the held-records gauge up to date with this loop's
// queues. It adds the difference rather than setting a value, so that two
// Processors of one topic sharing a Registerer add up.
func (l *loop) countHeld() {
	n := 0
	for _, items := range l.queues {
		n += len(items)
	}
	l.p.m.held.Add(float64(n - l.held))
	l.held = n
}

func (l *loop) group() string {
	if l.retry {
		return l.p.cfg.Group + "-retry"
	}
	return l.p.cfg.Group
}
