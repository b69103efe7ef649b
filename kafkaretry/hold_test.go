package kafkaretry_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/kafkaretry"
)

// retryRec is a record of the retry topic with the given state.
func retryRec(id string, partition int32, st kafkaretry.State) *kgo.Record {
	r := rec(id, partition)
	r.Topic = kafkaretry.RetryTopic(topic, 0)
	r.Headers = st.Headers()
	return r
}

// TestHeldRecordBlocksNothingElse holds a record for an hour in partition 0
// of the retry topic while partition 1 and the main topic keep flowing.
func TestHeldRecordBlocksNothingElse(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1),
		kfake.SeedTopics(2, topic, kafkaretry.RetryTopic(topic, 0), kafkaretry.DLQTopic(topic)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	e := &env{c: c, opts: []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}}

	now := time.Now()
	e.produce(t,
		retryRec("held", 0, kafkaretry.State{Attempt: 1, ProcessAfter: now.Add(time.Hour), FirstAttempt: now}),
		retryRec("behind-held", 0, kafkaretry.State{Attempt: 1, ProcessAfter: now, FirstAttempt: now}),
		retryRec("soon", 1, kafkaretry.State{Attempt: 1, ProcessAfter: now.Add(300 * time.Millisecond), FirstAttempt: now}),
	)
	j := newJournal()
	reg := prometheus.NewRegistry()
	e.run(t, kafkaretry.Config{Handler: j.handler(func(call) error { return nil }), Registerer: reg})

	e.produce(t, rec("main-0", 0), rec("main-1", 1))
	waitFor(t, "the other retry partition and the main topic", func() bool {
		return len(j.of("soon")) == 1 && len(j.of("main-0")) == 1 && len(j.of("main-1")) == 1
	})
	// The main topic keeps flowing while the record is held.
	e.produce(t, rec("main-2", 0))
	waitFor(t, "a later main record", func() bool { return len(j.of("main-2")) == 1 })
	// "behind-held" is held too if it came in the same fetch; otherwise it
	// waits in Kafka behind its paused partition.
	waitFor(t, "held records", func() bool { return metric(t, reg, "kafkaretry_held_records") >= 1 })

	if soon := j.of("soon")[0]; soon.at.Before(now.Add(300 * time.Millisecond).Truncate(time.Millisecond)) {
		t.Errorf("soon handled at %v, before it was due", soon.at)
	}
	for _, id := range []string{"held", "behind-held"} {
		if got := len(j.of(id)); got != 0 {
			t.Errorf("%s handled %d times while its partition's head is due in an hour", id, got)
		}
	}
}

// TestRestartMidRetry stops a Processor while it holds records and checks
// that the next one handles each of them once it is due, losing none.
func TestRestartMidRetry(t *testing.T) {
	t.Parallel()
	e := setup(t, 3)
	const delay = 2 * time.Second
	j := newJournal()
	cfg := kafkaretry.Config{
		Policy: retry.Policy{MaxAttempts: 3, Backoff: backoff.Policy{Kind: backoff.Fixed, Base: delay, Jitter: backoff.NoJitter}},
		Handler: j.handler(func(c call) error {
			if c.topic == topic {
				return errFlaky
			}
			return nil
		}),
	}
	regA := prometheus.NewRegistry()
	cfgA := cfg
	cfgA.Registerer = regA
	stopA := e.run(t, cfgA)

	const n = 6
	for i := range n {
		e.produce(t, rec("id-"+strconv.Itoa(i), int32(i%3)))
	}
	// Pausing stops the fetching of a partition at its held head, so the
	// first processor holds one record or a few per partition; the others
	// wait in Kafka.
	waitFor(t, "every record forwarded and some held", func() bool {
		var forwarded int64
		for _, o := range e.committed(t, group, topic) {
			forwarded += o
		}
		return forwarded == n && metric(t, regA, "kafkaretry_held_records") > 0
	})
	// Calls from the main topic may repeat (an aborted transaction runs
	// its records again); none from the retry topic may have come yet.
	for _, c := range j.all() {
		if c.topic != topic {
			t.Fatalf("%s retried before the first processor stopped: the delay is too short for this machine", c.id)
		}
	}
	stopA()

	cfgB := cfg
	cfgB.Registerer = prometheus.NewRegistry()
	e.run(t, cfgB)
	retries := func(id string) []call {
		var cs []call
		for _, c := range j.of(id) {
			if c.topic != topic {
				cs = append(cs, c)
			}
		}
		return cs
	}
	waitFor(t, "every record retried", func() bool {
		for i := range n {
			if len(retries("id-"+strconv.Itoa(i))) == 0 {
				return false
			}
		}
		return true
	})
	for i := range n {
		id := "id-" + strconv.Itoa(i)
		calls := j.of(id)
		rs := retries(id)
		if calls[0].topic != topic {
			t.Errorf("%s: first call from %s, want %s", id, calls[0].topic, topic)
		}
		// A handler may run again after an aborted transaction, never early.
		for _, r := range rs {
			if due := processAfter(t, r.rec); r.at.Before(due) {
				t.Errorf("%s retried at %v, before its x-process-after %v", id, r.at, due)
			}
		}
	}
}

// TestRebalanceHandsOverHeldRecords starts a second Processor in the group
// while the first holds records: the partitions it gives up are committed and
// their held records dropped, the newcomer fetches them again, and every
// record is retried once due, none lost.
func TestRebalanceHandsOverHeldRecords(t *testing.T) {
	t.Parallel()
	e := setup(t, 4)
	const delay = 2 * time.Second
	cfg := kafkaretry.Config{
		Policy:     retry.Policy{MaxAttempts: 3, Backoff: backoff.Policy{Kind: backoff.Fixed, Base: delay, Jitter: backoff.NoJitter}},
		ClientOpts: []kgo.Opt{kgo.HeartbeatInterval(100 * time.Millisecond)},
	}
	failMain := func(c call) error {
		if c.topic == topic {
			return errFlaky
		}
		return nil
	}
	ja, jb := newJournal(), newJournal()
	regA := prometheus.NewRegistry()
	cfgA := cfg
	cfgA.Handler, cfgA.Registerer = ja.handler(failMain), regA
	e.run(t, cfgA)

	const n = 8
	for i := range n {
		e.produce(t, rec("id-"+strconv.Itoa(i), int32(i%4)))
	}
	waitFor(t, "every record forwarded and some held", func() bool {
		var forwarded int64
		for _, o := range e.committed(t, group, topic) {
			forwarded += o
		}
		return forwarded == n && metric(t, regA, "kafkaretry_held_records") > 0
	})
	cfgB := cfg
	cfgB.Handler, cfgB.Registerer = jb.handler(failMain), prometheus.NewRegistry()
	e.run(t, cfgB)

	retried := func(id string) []call {
		var cs []call
		for _, c := range append(ja.of(id), jb.of(id)...) {
			if c.topic != topic {
				cs = append(cs, c)
			}
		}
		return cs
	}
	waitFor(t, "every record retried", func() bool {
		for i := range n {
			if len(retried("id-"+strconv.Itoa(i))) == 0 {
				return false
			}
		}
		return true
	})
	var byB int
	for i := range n {
		for _, c := range retried("id-" + strconv.Itoa(i)) {
			if due := processAfter(t, c.rec); c.at.Before(due) {
				t.Errorf("%s retried at %v, before its x-process-after %v", c.id, c.at, due)
			}
		}
	}
	for _, c := range jb.all() {
		if c.topic != topic {
			byB++
		}
	}
	if byB == 0 {
		t.Errorf("the second processor retried nothing: no retry partition was handed over")
	}
	waitFor(t, "the first processor to hold nothing", func() bool { return metric(t, regA, "kafkaretry_held_records") == 0 })
}
