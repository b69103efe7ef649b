package kafkaretry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/retrykit/retry"
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
	sess  *kgo.GroupTransactSession // with transactions; cl is its client
	retry bool                      // a retry consumer: records carry a state and may be held
	grp   string                    // its consumer group

	mu      sync.Mutex
	queues  map[tp][]item      // fetched, not yet done; non-empty means paused
	pending map[tp]*kgo.Record // last record done per partition, not yet committed
	held    int                // records in queues, as last added to the gauge

	lastCommit time.Time // without transactions: the last commit that succeeded

	// With transactions: whether one is open, the first record done in it
	// per partition (where to rewind to if it aborts), and the forwards
	// refused in a row with the last delay ProducePolicy chose.
	inTxn     bool
	txnBegan  time.Time // when it began, or got its first record done
	first     map[tp]*kgo.Record
	refusals  int
	prevDelay time.Duration
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

// refusedError is a forward Kafka refused within a transaction: the
// transaction must be aborted before anything else is produced in it.
type refusedError struct {
	topic string
	err   error
}

func (e *refusedError) Error() string { return "forward to " + e.topic + " refused: " + e.err.Error() }

func (e *refusedError) Unwrap() error { return e.err }

// newLoop makes the consumer of topics in group: the main topic's when
// topics is the main topic alone, else a retry consumer.
func newLoop(p *Processor, group string, topics []string, txn bool, txnID string) (*loop, error) {
	retry := !(len(topics) == 1 && topics[0] == p.cfg.Topic)
	l := &loop{p: p, retry: retry, grp: group, queues: make(map[tp][]item), pending: make(map[tp]*kgo.Record),
		first: make(map[tp]*kgo.Record), lastCommit: time.Now()}
	opts := []kgo.Opt{
		kgo.RecordDeliveryTimeout(30 * time.Second),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// Records of an aborted transaction (a forward whose source was
		// not committed) must never be handled.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	}
	if retry {
		// A resumed partition joins the fetches only once the fetch in
		// flight returns, so the broker's long-poll bounds how late a
		// record behind a held one is fetched.
		opts = append(opts, kgo.FetchMaxWait(RetryFetchMaxWait))
	}
	if d := p.cfg.SessionTimeout; d > 0 {
		opts = append(opts, kgo.SessionTimeout(d))
	}
	if d := p.cfg.HeartbeatInterval; d > 0 {
		opts = append(opts, kgo.HeartbeatInterval(d))
	}
	if d := p.cfg.RebalanceTimeout; d > 0 {
		opts = append(opts, kgo.RebalanceTimeout(d))
	}
	if d := p.cfg.TransactionTimeout; d > 0 && txn {
		opts = append(opts, kgo.TransactionTimeout(d))
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
	if !txn {
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return nil, fmt.Errorf("kafkaretry: %w", err)
		}
		l.cl = cl
		return l, nil
	}
	// One transactional ID per consumer: "-main", and the retry group's
	// suffix ("-retry", or "-retry-0" … with NamingSpring).
	suffix := "-main"
	if retry {
		suffix = strings.TrimPrefix(group, p.cfg.Group)
	}
	sess, err := kgo.NewGroupTransactSession(append(opts, kgo.TransactionalID(txnID+suffix))...)
	if err != nil {
		return nil, fmt.Errorf("kafkaretry: %w", err)
	}
	l.sess, l.cl = sess, sess.Client()
	return l, nil
}

func (l *loop) close() {
	if l.sess != nil {
		l.sess.Close()
		return
	}
	l.cl.Close()
}

// run polls, handles what is due, holds the rest and commits, until ctx
// ends. While records are held, one goroutine waits for the earliest due
// time and cuts the poll short then; no goroutine waits per record.
func (l *loop) run(ctx context.Context) error {
	// Not deferred: a panic (a Handler's) holds mu, and stop would wait for
	// it forever instead of letting the panic through.
	err := l.poll(ctx)
	l.stop(ctx)
	return err
}

// poll is run's loop.
func (l *loop) poll(ctx context.Context) error {
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
		if l.sess != nil && !l.inTxn {
			// Begun before the poll, so that a rebalance during the poll
			// aborts it: the records just fetched may be another's now.
			if err := l.begin(); err != nil {
				wake()
				return err
			}
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
		var wait time.Duration
		switch {
		case ctx.Err() != nil && l.sess != nil:
			// A handling cut short may have produced its forward without
			// its offset: only an abort keeps the two together.
			l.abortOnStop(ctx)
		case l.sess != nil && (err != nil || len(l.pending) > 0):
			_, wait, err = l.endTxn(ctx, err)
		case l.sess != nil:
			// Nothing done: the transaction stays open, with nothing in it,
			// for the next poll. Ending it would cost a round trip, and
			// franz-go holds back the next End for 500ms after one that
			// committed no offsets (it cannot tell KIP-447 brokers then).
		default:
			l.commit(ctx)
		}
		l.mu.Unlock()
		l.cl.AllowRebalance()
		if err != nil && ctx.Err() == nil {
			return err // ProducePolicy gave up on a forward, or a transaction failed
		}
		if ctx.Err() != nil {
			return nil // ctx ended during a handling
		}
		if wait > 0 && l.p.produce.Clock.Sleep(ctx, wait) != nil {
			return nil
		}
	}
}

// endTxn ends the open transaction after a drain that returned err:
// committed, with the offsets of the records done, when err is nil;
// aborted when a forward was refused (err is a *refusedError), and then
// wait is ProducePolicy's delay before the next try, or an error when it
// gives up. After an abort every record of the transaction is fetched and
// handled again: its forwards are gone with it.
func (l *loop) endTxn(ctx context.Context, err error) (committed bool, wait time.Duration, _ error) {
	var refused *refusedError
	if err != nil && !errors.As(err, &refused) {
		return false, 0, err
	}
	try := kgo.TransactionEndTry(refused == nil)
	committed, endErr := l.sess.End(kgo.PreTxnCommitFnContext(ctx, l.txnOffsets), try)
	l.inTxn = false
	if endErr == nil && committed {
		clear(l.pending)
		clear(l.first)
		l.refusals, l.prevDelay = 0, 0
		return true, 0, nil
	}
	l.rewind()
	if endErr != nil {
		return false, 0, fmt.Errorf("kafkaretry: ending a transaction: %w", endErr)
	}
	if refused == nil {
		l.p.log.Info("kafkaretry: transaction aborted by a rebalance; its records will be handled again", "group", l.group())
		return false, 0, nil
	}
	l.refusals++
	now := l.p.produce.Clock.Now()
	v := l.p.produce.Decide(&retry.Failure{Err: refused.err, Attempt: l.refusals, PrevDelay: l.prevDelay, Start: now, Now: now})
	if v.Stop != nil {
		return false, 0, fmt.Errorf("kafkaretry: %w", errors.Join(v.Stop, refused))
	}
	l.prevDelay = v.PrevDelay
	l.p.log.Warn("kafkaretry: forward refused; transaction aborted, its records will be handled again",
		"topic", refused.topic, "error", refused.err, "delay", v.Delay)
	return false, v.Delay, nil
}

// begin opens a transaction.
func (l *loop) begin() error {
	if err := l.sess.Begin(); err != nil {
		return fmt.Errorf("kafkaretry: beginning a transaction: %w", err)
	}
	l.inTxn, l.txnBegan = true, time.Now()
	return nil
}

// checkpoint, within a drain, commits the open transaction once it has
// been open CommitInterval and opens the next, so that a crash runs again
// at most that long's records, not a whole poll's. It reports whether the
// drain can go on: after an abort the queues were emptied (see rewind).
func (l *loop) checkpoint(ctx context.Context) (bool, error) {
	if time.Since(l.txnBegan) < l.p.cfg.CommitInterval {
		return true, nil
	}
	committed, _, err := l.endTxn(ctx, nil)
	if err != nil {
		return false, err
	}
	if err := l.begin(); err != nil {
		return false, err
	}
	return committed, nil
}

// abortOnStop aborts the open transaction of a consumer that is stopping.
func (l *loop) abortOnStop(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	l.inTxn = false
	if _, err := l.sess.End(ctx, kgo.TryAbort); err != nil {
		l.p.log.Warn("kafkaretry: aborting the transaction on stop failed", "group", l.group(), "error", err)
	}
	clear(l.pending)
	clear(l.first)
}

// txnOffsets sets the offsets the transaction commits to those of the
// records done. franz-go would commit every record polled, but held
// records are polled and not done.
func (l *loop) txnOffsets(req *kmsg.TxnOffsetCommitRequest) error {
	ids := make(map[string][16]byte, len(req.Topics))
	for _, t := range req.Topics {
		ids[t.Topic] = t.TopicID
	}
	topics := make(map[string]int, len(l.pending))
	req.Topics = req.Topics[:0]
	for key, r := range l.pending {
		i, ok := topics[key.topic]
		if !ok {
			t := kmsg.NewTxnOffsetCommitRequestTopic()
			t.Topic, t.TopicID = key.topic, ids[key.topic]
			i = len(req.Topics)
			topics[key.topic] = i
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset, p.LeaderEpoch, p.Metadata = key.partition, r.Offset+1, r.LeaderEpoch, &req.MemberID
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	return nil
}

// rewind, after an aborted transaction, sets every partition with records
// done in it or held back to the first of them, and forgets them: they are
// fetched again. franz-go rewinds to the offsets it believes committed,
// which are past the held records (see txnOffsets).
func (l *loop) rewind() {
	to := make(map[string]map[int32]kgo.EpochOffset)
	set := func(key tp, r *kgo.Record) {
		if to[key.topic] == nil {
			to[key.topic] = make(map[int32]kgo.EpochOffset)
		}
		if cur, ok := to[key.topic][key.partition]; !ok || r.Offset < cur.Offset {
			to[key.topic][key.partition] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset}
		}
	}
	for key, r := range l.first {
		set(key, r)
	}
	resume := make(map[string][]int32)
	for key, items := range l.queues {
		if len(items) > 0 {
			set(key, items[0].rec)
		}
		resume[key.topic] = append(resume[key.topic], key.partition)
	}
	l.cl.SetOffsets(to)
	if len(resume) > 0 {
		l.cl.ResumeFetchPartitions(resume)
	}
	clear(l.queues)
	clear(l.pending)
	clear(l.first)
	l.countHeld()
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
			forwarded, err := l.p.handle(ctx, l, items[0])
			if err != nil {
				l.queues[key] = items
				return err
			}
			if l.sess != nil && len(l.pending) == 0 {
				// The transaction, open since an idle poll perhaps, holds
				// work from now on: CommitInterval counts from here.
				l.txnBegan = time.Now()
			}
			l.pending[key] = items[0].rec
			if l.sess != nil && l.first[key] == nil {
				l.first[key] = items[0].rec
			}
			items[0] = item{}
			items = items[1:]
			l.queues[key] = items // what a checkpoint's rewind reads
			// Without transactions, each commit narrows what a crash
			// makes run again: a forwarded record at once, since running
			// it again would forward a second copy.
			if l.sess == nil && (forwarded || time.Since(l.lastCommit) >= l.p.cfg.CommitInterval) {
				l.commit(ctx)
			}
			if l.sess != nil {
				if goOn, err := l.checkpoint(ctx); !goOn {
					clear(pause) // rewind emptied the queues and resumed their partitions
					return err
				}
			}
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
	l.lastCommit = time.Now()
}

// forward produces r, a retry or dead-letter copy, and waits for the
// brokers' acknowledgement. Without transactions a refusal is retried in
// place (Processor.forward); within one, the transaction must be aborted
// first, so a refusal is returned as a *refusedError.
func (l *loop) forward(ctx context.Context, r *kgo.Record) error {
	if l.sess == nil {
		return l.p.forward(ctx, l.cl, r)
	}
	attempt := *r
	attempt.Headers = slices.Clone(r.Headers) // a producer hook may rewrite them
	if err := l.cl.ProduceSync(ctx, &attempt).FirstErr(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &refusedError{topic: r.Topic, err: err}
	}
	return nil
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
			// With transactions nothing is pending here: a transaction
			// ends before the rebalance it would block.
			if r := l.pending[key]; r != nil && commit && l.sess == nil {
				done = append(done, r)
			}
			delete(l.pending, key)
			delete(l.queues, key)
			delete(l.first, key)
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
	if l.sess == nil {
		l.commit(ctx)
	} else if l.inTxn {
		l.abortOnStop(ctx) // nothing was done in it: it was begun for a poll
	}
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

func (l *loop) group() string { return l.grp }
