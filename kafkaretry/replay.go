package kafkaretry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/retrykit/retry"
)

// ReplayTarget is where Replay republishes dead-lettered records.
type ReplayTarget int

// The replay targets. The zero value is ToMain.
const (
	// ToMain republishes to the main topic T as new records: key, value and
	// user headers, none of the retry headers. They start over at attempt 1.
	ToMain ReplayTarget = iota
	// ToRetry republishes to the first retry topic (T-retry, or T-retry-1
	// with tiers), due at once, with x-retry-attempt 0: the retry consumer
	// handles them as attempt 1, with every attempt of the Policy ahead.
	ToRetry
)

// ReplayOptions says which dead-lettered records Replay republishes, and
// where. Topic is required.
type ReplayOptions struct {
	Topic  string // the main topic T; the records are read from T-dlq
	Target ReplayTarget
	Tiers  int // the Processor's number of tiers, to name the first retry topic; 0 means none

	// Since and Until keep the DLQ records whose timestamp (when they were
	// dead-lettered) is in [Since, Until); a zero time leaves that end open.
	Since, Until time.Time
	// ErrorType keeps the records whose x-last-error-type is exactly this;
	// "" keeps all.
	ErrorType string
	// DryRun counts the records that would be replayed without producing.
	DryRun bool
	// Naming, RetrySuffix and DLQSuffix are the Processor's (see Config):
	// they name the dead-letter topic read and the retry topic replayed to.
	Naming                 Naming
	RetrySuffix, DLQSuffix string
	// From, when set, is the dead-letter topic to read instead of the
	// default one, say one that Config.DeadLetterTopic chose.
	From string
	// Clock gives the due time of records replayed ToRetry; nil means the
	// real clock.
	Clock retry.Clock
}

// ReplayResult counts what Replay did.
type ReplayResult struct {
	Scanned    int    // DLQ records read
	Replayed   int    // records produced (or, with DryRun, that would be)
	Duplicates int    // records skipped as copies of one already replayed in this run
	From       string // the dead-letter topic read
	To         string // the topic replayed to
}

// Replay republishes the records of T-dlq that match opts, from the first
// one (or the first at Since) up to the end of the DLQ as it is when Replay
// starts, and returns once every republished record is acknowledged. It does
// not remove records from the DLQ: running it twice replays them twice, so
// narrow a repeat with Since.
//
// A dead-letter topic may hold several copies of one failure (a crash
// without transactions, or Spring Kafka and a Processor both forwarding):
// Replay republishes each identity (RecordID: the original record's topic,
// partition and offset, and its replays so far) once per run, and counts
// the other copies in Duplicates. It reads only committed records. A record
// replayed ToRetry keeps its identity with one more replay (x-replays), so
// that its next failure is not taken for a copy of this one.
//
// cl produces the republished records; Replay reads the DLQ with a client
// of its own made with cl's options (kgo.Client.Opts), so cl should not
// consume as a group member. When a produce fails Replay stops and returns
// what it did so far with the error.
func Replay(ctx context.Context, cl *kgo.Client, opts ReplayOptions) (ReplayResult, error) {
	n := newNames(opts.Naming, opts.RetrySuffix, opts.DLQSuffix)
	dlq := opts.From
	if dlq == "" {
		dlq = n.dlqTopic(opts.Topic)
	}
	res := ReplayResult{From: dlq, To: opts.Topic}
	if opts.Target == ToRetry {
		res.To = n.retryTopics(opts.Topic, opts.Tiers)[0]
	}
	if opts.Topic == "" {
		return res, errors.New("kafkaretry: replay: topic is required")
	}
	clock := opts.Clock
	if clock == nil {
		clock = realClock{}
	}
	start, end, err := replayRange(ctx, kadm.NewClient(cl), dlq, opts.Since)
	if err != nil {
		return res, err
	}
	if len(start) == 0 {
		return res, nil
	}
	// Read committed, so that the forwards of aborted transactions are
	// skipped, and with the control records (transaction markers), so
	// that the end is seen even when a marker is the last offset.
	reader, err := kgo.NewClient(append(cl.Opts(),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{dlq: start}))...)
	if err != nil {
		return res, fmt.Errorf("kafkaretry: replay: %w", err)
	}
	defer reader.Close()

	seen := make(map[ID]bool)
	for len(end) > 0 {
		fetches := reader.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("kafkaretry: replay: %w", err)
		}
		if err := fetches.Err(); err != nil {
			return res, fmt.Errorf("kafkaretry: replay: reading %s: %w", dlq, err)
		}
		var out []*kgo.Record
		fetches.EachRecord(func(r *kgo.Record) {
			stop, ok := end[r.Partition]
			if r.Topic != dlq || !ok || r.Offset >= stop {
				return
			}
			if r.Offset+1 >= stop {
				delete(end, r.Partition)
			}
			if r.Attrs.IsControl() {
				return
			}
			res.Scanned++
			rr, id := replayed(r, &opts, n.spring, res.To, clock.Now())
			switch {
			case rr == nil:
			case seen[id]:
				res.Duplicates++
			default:
				seen[id] = true
				res.Replayed++
				out = append(out, rr)
			}
		})
		if len(out) > 0 && !opts.DryRun {
			if err := cl.ProduceSync(ctx, out...).FirstErr(); err != nil {
				return res, fmt.Errorf("kafkaretry: replay: producing to %s: %w", res.To, err)
			}
		}
	}
	return res, nil
}

// replayRange returns, for each partition of the DLQ that has records to
// read, where to start and the end offset (exclusive) as it is now.
func replayRange(ctx context.Context, adm *kadm.Client, dlq string, since time.Time) (map[int32]kgo.Offset, map[int32]int64, error) {
	// The last stable offset: records past it are in a transaction still
	// open, and a read-committed reader waits for it to end.
	ends, err := adm.ListCommittedOffsets(ctx, dlq)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("kafkaretry: replay: listing %s: %w", dlq, err)
	}
	var starts kadm.ListedOffsets
	if since.IsZero() {
		starts, err = adm.ListStartOffsets(ctx, dlq)
	} else {
		starts, err = adm.ListOffsetsAfterMilli(ctx, since.UnixMilli(), dlq)
	}
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("kafkaretry: replay: listing %s: %w", dlq, err)
	}
	start, end := make(map[int32]kgo.Offset), make(map[int32]int64)
	ends.Each(func(e kadm.ListedOffset) {
		s, ok := starts.Lookup(dlq, e.Partition)
		if ok && s.Offset >= 0 && s.Offset < e.Offset {
			start[e.Partition] = kgo.NewOffset().At(s.Offset)
			end[e.Partition] = e.Offset
		}
	})
	return start, end, nil
}

// replayed returns the record to republish for the DLQ record r, or nil when
// opts filter it out, and r's identity.
func replayed(r *kgo.Record, opts *ReplayOptions, spring bool, to string, now time.Time) (*kgo.Record, ID) {
	st, _ := ReadState(r) // a DLQ record's bad headers only matter to the filter below
	id := st.id(r)
	if !opts.Since.IsZero() && r.Timestamp.Before(opts.Since) ||
		!opts.Until.IsZero() && !r.Timestamp.Before(opts.Until) {
		return nil, id
	}
	if opts.ErrorType != "" && st.LastErrorType != opts.ErrorType {
		return nil, id
	}
	out := &kgo.Record{Topic: to, Key: r.Key, Value: r.Value}
	if opts.Target == ToMain {
		// A main-topic record carries no state: it is a new record, with
		// an identity of its own.
		out.Headers = userHeaders(r, 0)
		return out, id
	}
	out.Headers = withState(r, &State{
		Attempt: 0, ProcessAfter: now, FirstAttempt: now, OriginalTopic: id.Topic,
		OriginalPartition: id.Partition, OriginalOffset: id.Offset, Replays: id.Replays + 1,
	}, spring)
	return out, id
}
