package kafkaretry_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/kafkaretry"
)

// TestProduceFailureCommitsNothing makes the broker refuse every produce to
// the retry topic (kfake's control hook answers them with an error) and
// checks that the main topic's offset is not committed until the refusal
// ends, and that the record is then forwarded once.
func TestProduceFailureCommitsNothing(t *testing.T) {
	t.Parallel()
	e := setup(t, 1)
	retryTopic := kafkaretry.RetryTopic(topic, 0)
	failing, refused := refuseProduces(t, e, retryTopic)
	failing.Store(true)

	j := newJournal()
	e.run(t, kafkaretry.Config{
		Transactions:  kafkaretry.TxnOff, // TestProduceFailureAbortsTheTransaction has them
		Policy:        retry.Policy{MaxAttempts: 3, Backoff: backoff.Policy{Kind: backoff.Fixed, Base: 10 * time.Millisecond, Jitter: backoff.NoJitter}},
		ProducePolicy: retry.Policy{MaxAttempts: math.MaxInt, Backoff: backoff.Policy{Kind: backoff.Fixed, Base: 50 * time.Millisecond, Jitter: backoff.NoJitter}},
		Handler: j.handler(func(c call) error {
			if c.topic == topic {
				return errFlaky
			}
			return nil
		}),
	})
	e.produce(t, rec("a", 0))
	waitFor(t, "three refused forwards", func() bool { return refused.Load() >= 3 })

	if got := e.committed(t, group, topic); len(got) != 0 {
		t.Errorf("committed %v while the forward was refused, want nothing", got)
	}
	if got := len(j.of("a")); got != 1 {
		t.Errorf("handled %d times while the forward was refused, want 1: a refused forward is retried, not the handler", got)
	}
	if got := len(e.records(t, retryTopic)); got != 0 {
		t.Errorf("retry topic has %d records while refusing them", got)
	}

	failing.Store(false)
	waitFor(t, "the retry", func() bool { return len(j.of("a")) == 2 })
	waitFor(t, "the commit", func() bool { return e.committed(t, group, topic)[0] == 1 })
	if got := len(e.records(t, retryTopic)); got != 1 {
		t.Errorf("retry topic has %d records, want the record forwarded once", got)
	}
}

// refuseProduces creates topic and makes the broker answer every produce to
// it with POLICY_VIOLATION while failing is set, counting the refusals.
func refuseProduces(t *testing.T, e *env, topic string) (failing *atomic.Bool, refused *atomic.Int32) {
	t.Helper()
	adm := kadm.NewClient(e.client(t))
	if _, err := adm.CreateTopic(t.Context(), 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	details, err := adm.ListTopics(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	id := details[topic].ID
	failing, refused = new(atomic.Bool), new(atomic.Int32)
	e.c.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		e.c.KeepControl()
		req := kreq.(*kmsg.ProduceRequest)
		if !failing.Load() || !slices.ContainsFunc(req.Topics, func(rt kmsg.ProduceRequestTopic) bool {
			return rt.Topic == topic || rt.TopicID == id
		}) {
			return nil, nil, false
		}
		refused.Add(1)
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.PolicyViolation.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	return failing, refused
}

// TestProduceFailureAbortsTheTransaction is TestProduceFailureCommitsNothing
// with transactions: a refused forward aborts the transaction, so the
// record is handled again (after ProducePolicy's delay) rather than its
// forward retried in place, nothing is committed meanwhile, and once the
// refusals end the retry topic holds one committed copy.
func TestProduceFailureAbortsTheTransaction(t *testing.T) {
	t.Parallel()
	e := setup(t, 1)
	retryTopic := kafkaretry.RetryTopic(topic, 0)
	failing, refused := refuseProduces(t, e, retryTopic)
	failing.Store(true)

	j := newJournal()
	e.run(t, kafkaretry.Config{
		Transactions:  kafkaretry.TxnOn,
		Policy:        retry.Policy{MaxAttempts: 3, Backoff: backoff.Policy{Kind: backoff.Fixed, Base: 10 * time.Millisecond, Jitter: backoff.NoJitter}},
		ProducePolicy: retry.Policy{MaxAttempts: math.MaxInt, Backoff: backoff.Policy{Kind: backoff.Fixed, Base: 50 * time.Millisecond, Jitter: backoff.NoJitter}},
		Handler: j.handler(func(c call) error {
			if c.topic == topic {
				return errFlaky
			}
			return nil
		}),
	})
	e.produce(t, rec("a", 0))
	waitFor(t, "three refused forwards", func() bool { return refused.Load() >= 3 })
	if got := e.committed(t, group, topic); len(got) != 0 {
		t.Errorf("committed %v while the forward was refused, want nothing", got)
	}
	failing.Store(false)
	waitFor(t, "the retry", func() bool {
		cs := j.of("a")
		return len(cs) > 0 && cs[len(cs)-1].topic == retryTopic
	})
	waitFor(t, "the commit", func() bool { return e.committed(t, group, topic)[0] == 1 })
	if got := len(e.records(t, retryTopic)); got != 1 {
		t.Errorf("retry topic has %d committed records, want the record forwarded once", got)
	}
}

// TestProducePolicyGivesUp checks that when ProducePolicy stops retrying a
// refused forward, Run returns the error and commits nothing, with and
// without transactions.
func TestProducePolicyGivesUp(t *testing.T) {
	t.Parallel()
	for _, txn := range []kafkaretry.TxnMode{kafkaretry.TxnOff, kafkaretry.TxnOn} {
		t.Run(map[kafkaretry.TxnMode]string{kafkaretry.TxnOff: "no transactions", kafkaretry.TxnOn: "transactions"}[txn], func(t *testing.T) {
			t.Parallel()
			e := setup(t, 1)
			failing, refused := refuseProduces(t, e, kafkaretry.DLQTopic(topic))
			failing.Store(true)
			p, err := kafkaretry.New(kafkaretry.Config{
				Topic: topic, Group: group, ClientOpts: e.opts, Logger: slogT(t), Transactions: txn,
				ProducePolicy: retry.Policy{MaxAttempts: 3, Backoff: backoff.Policy{Kind: backoff.Fixed, Base: 10 * time.Millisecond, Jitter: backoff.NoJitter}},
				Handler:       func(context.Context, *kgo.Record) error { return retry.Permanent(errFlaky) },
			})
			if err != nil {
				t.Fatal(err)
			}
			e.produce(t, rec("a", 0))
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			err = p.Run(ctx)
			if !errors.Is(err, kerr.PolicyViolation) || !errors.Is(err, retry.ErrAttemptsExhausted) {
				t.Errorf("Run: %v, want the refusal after the forward's attempts ran out", err)
			}
			if got := refused.Load(); got != 3 {
				t.Errorf("%d forwards refused, want 3", got)
			}
			if got := e.committed(t, group, topic); len(got) != 0 {
				t.Errorf("committed %v, want nothing", got)
			}
		})
	}
}
