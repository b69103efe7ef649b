package kafkaretry_test

import (
	"encoding/binary"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/kafkaretry"
)

// Spring's decodings, written here from spring-kafka's sources rather than
// taken from the package: new BigInteger(bytes).longValue() for the
// timestamps, ByteBuffer.wrap(bytes).getInt() for attempts and the
// partition, getLong() for the offset.

func springBigInteger(t *testing.T, b []byte) int64 {
	t.Helper()
	if len(b) == 0 || len(b) > 8 {
		t.Fatalf("BigInteger of %d bytes", len(b))
	}
	n := int64(int8(b[0])) // the sign bit of the first byte extends
	for _, c := range b[1:] {
		n = n<<8 | int64(c)
	}
	return n
}

func springInt(t *testing.T, b []byte) int32 {
	t.Helper()
	if len(b) != 4 {
		t.Fatalf("int of %d bytes", len(b))
	}
	return int32(binary.BigEndian.Uint32(b))
}

func springLong(t *testing.T, b []byte) int64 {
	t.Helper()
	if len(b) != 8 {
		t.Fatalf("long of %d bytes", len(b))
	}
	return int64(binary.BigEndian.Uint64(b))
}

// bigInteger encodes n as Java's BigInteger.toByteArray: the fewest bytes
// of big-endian two's complement.
func bigInteger(n int64) []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(n))
	for len(b) > 1 && (b[0] == 0 && b[1] < 0x80 || b[0] == 0xff && b[1] >= 0x80) {
		b = b[1:]
	}
	return b
}

// headerBytes returns the values of header k of r, in order.
func headerBytes(r *kgo.Record, k string) [][]byte {
	var vs [][]byte
	for _, h := range r.Headers {
		if h.Key == k {
			vs = append(vs, h.Value)
		}
	}
	return vs
}

// one returns the single value of header k of r, failing when it is
// missing or repeated: Spring reads lastHeader, and a stale one would lie.
func one(t *testing.T, r *kgo.Record, k string) []byte {
	t.Helper()
	vs := headerBytes(r, k)
	if len(vs) != 1 {
		t.Fatalf("%s on %s: %d values, want 1", k, r.Topic, len(vs))
	}
	return vs[0]
}

type declined struct{}

func (declined) Error() string { return "card declined" }
func (declined) Code() string  { return "com.acme.CardDeclinedException" }

// TestSpringRecordHonoured hands the retry consumer a record as Spring
// Kafka's DeadLetterPublishingRecovererFactory writes it into the first
// retry topic (retry_topic-attempts 2 as a 4-byte int, a backoff timestamp
// as a BigInteger, the original record's topic, partition and offset as
// string, int and long, no x- header): it is not handled before its
// backoff timestamp, it counts as attempt 2 of 3, and the records the
// Processor forwards carry Spring's headers, once each, in Spring's
// encodings, with the handler's Code() as the exception class.
func TestSpringRecordHonoured(t *testing.T) {
	t.Parallel()
	e := setup(t, 1)
	j := newJournal()
	e.run(t, kafkaretry.Config{
		Naming: kafkaretry.NamingSpring,
		Tiers:  []time.Duration{100 * time.Millisecond, 200 * time.Millisecond},
		Policy: retry.Policy{MaxAttempts: 3},
		Handler: j.handler(func(call) error {
			return declined{}
		}),
	})
	retry0, retry1, dlt := topic+"-retry-0", topic+"-retry-1", topic+"-dlt"
	due := time.Now().Add(700 * time.Millisecond).Truncate(time.Millisecond)
	first := due.Add(-time.Minute)
	e.produce(t, &kgo.Record{Topic: retry0, Key: []byte("s-1"), Value: []byte("v"), Headers: []kgo.RecordHeader{
		{Key: "traceparent", Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")},
		{Key: "retry_topic-original-timestamp", Value: bigInteger(first.UnixMilli())},
		{Key: "retry_topic-attempts", Value: binary.BigEndian.AppendUint32(nil, 2)},
		{Key: "retry_topic-backoff-timestamp", Value: bigInteger(due.UnixMilli())},
		{Key: "kafka_dlt-original-topic", Value: []byte(topic)},
		{Key: "kafka_dlt-original-partition", Value: binary.BigEndian.AppendUint32(nil, 0)},
		{Key: "kafka_dlt-original-offset", Value: binary.BigEndian.AppendUint64(nil, 41)},
		{Key: "kafka_dlt-exception-fqcn", Value: []byte("java.net.SocketTimeoutException")},
		{Key: "kafka_dlt-exception-stacktrace", Value: []byte("at com.acme...")},
	}})
	waitFor(t, "the record in the DLT", func() bool { return len(e.records(t, dlt)) == 1 })

	calls := j.of("s-1")
	if len(calls) != 2 || calls[0].topic != retry0 || calls[1].topic != retry1 {
		t.Fatalf("handled %d times, want twice: attempt 2 from %s, attempt 3 from %s; got %+v", len(calls), retry0, retry1, calls)
	}
	if calls[0].at.Before(due) {
		t.Errorf("handled at %v, before its retry_topic-backoff-timestamp %v", calls[0].at, due)
	}

	hop := e.records(t, retry1)
	if len(hop) != 1 {
		t.Fatalf("%s holds %d records, want 1", retry1, len(hop))
	}
	r := hop[0]
	if got := springInt(t, one(t, r, "retry_topic-attempts")); got != 3 {
		t.Errorf("%s: retry_topic-attempts %d, want 3 (Spring counts the attempt to come)", retry1, got)
	}
	backoffAt := springBigInteger(t, one(t, r, "retry_topic-backoff-timestamp"))
	if want := calls[0].at.Add(200 * time.Millisecond).UnixMilli(); backoffAt < want || backoffAt > want+1000 {
		t.Errorf("%s: backoff timestamp %d, want about %d (attempt 2's time plus tier 2's 200ms)", retry1, backoffAt, want)
	}
	if got := springBigInteger(t, one(t, r, "retry_topic-original-timestamp")); got != first.UnixMilli() {
		t.Errorf("%s: retry_topic-original-timestamp %d, want the original's %d", retry1, got, first.UnixMilli())
	}
	if got := header(r, kafkaretry.HeaderRetryAttempt); got != "2" {
		t.Errorf("%s: x-retry-attempt %q, want 2", retry1, got)
	}
	if got := one(t, r, "traceparent"); len(got) == 0 {
		t.Errorf("%s lost the traceparent", retry1)
	}
	if n := len(headerBytes(r, "kafka_dlt-exception-stacktrace")); n != 0 {
		t.Errorf("%s kept Spring's stack trace of an older attempt", retry1)
	}

	d := e.records(t, dlt)[0]
	if got := springInt(t, one(t, d, "retry_topic-attempts")); got != 4 {
		t.Errorf("DLT: retry_topic-attempts %d, want 4", got)
	}
	if n := len(headerBytes(d, "retry_topic-backoff-timestamp")); n != 0 {
		t.Errorf("DLT record has a backoff timestamp: no retry is coming")
	}
	if got := string(one(t, d, "kafka_dlt-original-topic")); got != topic {
		t.Errorf("DLT: original topic %q, want %q", got, topic)
	}
	if got := springInt(t, one(t, d, "kafka_dlt-original-partition")); got != 0 {
		t.Errorf("DLT: original partition %d, want 0", got)
	}
	if got := springLong(t, one(t, d, "kafka_dlt-original-offset")); got != 41 {
		t.Errorf("DLT: original offset %d, want the hand-written record's 41", got)
	}
	if got := string(one(t, d, "kafka_dlt-exception-fqcn")); got != "com.acme.CardDeclinedException" {
		t.Errorf("DLT: exception class %q, want the handler's Code()", got)
	}
	if got := string(one(t, d, "kafka_dlt-exception-message")); got != "card declined" {
		t.Errorf("DLT: exception message %q", got)
	}
	if got := header(d, kafkaretry.HeaderRecordID); got != topic+"/0/41" {
		t.Errorf("DLT: x-record-id %q, want %s/0/41", got, topic)
	}
	if id := kafkaretry.RecordID(d); id != (kafkaretry.ID{Topic: topic, Partition: 0, Offset: 41}) {
		t.Errorf("RecordID = %+v", id)
	}
}

// TestSpringEncodings checks ReadState against Spring's encodings of the
// boundaries: a 1-byte attempts header (Spring before 2.8.x), negative and
// 8-byte BigIntegers, a backoff timestamp written as decimal text, Spring
// 3's kafka_original-… names, and malformed values reported.
func TestSpringEncodings(t *testing.T) {
	t.Parallel()
	ms := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC).UnixMilli()
	rec := func(hs ...string) *kgo.Record {
		r := &kgo.Record{Topic: "orders-retry", Partition: 2, Offset: 9, Timestamp: time.UnixMilli(ms - 1000)}
		for i := 0; i+1 < len(hs); i += 2 {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: hs[i], Value: []byte(hs[i+1])})
		}
		return r
	}
	long := string(binary.BigEndian.AppendUint64(nil, 77))
	tests := []struct {
		name       string
		r          *kgo.Record
		attempt    int
		due        int64 // ms; 0 means due now
		origin     kafkaretry.ID
		badHeaders []string
	}{
		{"1-byte attempts", rec("retry_topic-attempts", "\x03", "retry_topic-backoff-timestamp", string(bigInteger(ms))),
			2, ms, kafkaretry.ID{Topic: "orders-retry", Partition: 2, Offset: 9}, nil},
		{"text timestamp", rec("retry_topic-attempts", "\x00\x00\x00\x02", "retry_topic-backoff-timestamp", strconv.FormatInt(ms, 10)),
			1, ms, kafkaretry.ID{Topic: "orders-retry", Partition: 2, Offset: 9}, nil},
		{"Spring 3 names", rec("retry_topic-attempts", "\x00\x00\x00\x02", "kafka_original-topic", "orders",
			"kafka_original-partition", "\x00\x00\x00\x01", "kafka_original-offset", long),
			1, 0, kafkaretry.ID{Topic: "orders", Partition: 1, Offset: 77}, []string{"x-process-after"}},
		{"ours and Spring's: Spring's are newer", rec("x-retry-attempt", "1", "retry_topic-attempts", "\x00\x00\x00\x03",
			"x-original-topic", "orders", "x-original-partition", "0", "x-original-offset", "5"),
			2, 0, kafkaretry.ID{Topic: "orders", Partition: 0, Offset: 5}, []string{"x-process-after"}},
		{"malformed", rec("retry_topic-attempts", "\x00\x02", "retry_topic-backoff-timestamp", "",
			"kafka_dlt-original-topic", "orders", "kafka_dlt-original-partition", "\x01", "kafka_dlt-original-offset", "\x05"),
			1, 0, kafkaretry.ID{Topic: "orders-retry", Partition: 2, Offset: 9},
			[]string{"retry_topic-attempts", "retry_topic-backoff-timestamp", "kafka_dlt-original-partition", "kafka_dlt-original-offset"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := kafkaretry.ReadState(tt.r)
			if st.Attempt != tt.attempt {
				t.Errorf("attempt %d, want %d", st.Attempt, tt.attempt)
			}
			if tt.due == 0 && !st.ProcessAfter.IsZero() || tt.due != 0 && st.ProcessAfter.UnixMilli() != tt.due {
				t.Errorf("due %v, want %d", st.ProcessAfter, tt.due)
			}
			if id := kafkaretry.RecordID(tt.r); id != tt.origin {
				t.Errorf("RecordID %+v, want %+v", id, tt.origin)
			}
			var got []string
			if j, ok := err.(interface{ Unwrap() []error }); ok {
				for _, e := range j.Unwrap() {
					var he *kafkaretry.HeaderError
					if errors.As(e, &he) && he.Header != "x-first-attempt-timestamp" {
						got = append(got, he.Header)
					}
				}
			}
			if !equalSets(got, tt.badHeaders) {
				t.Errorf("bad headers %v, want %v (%v)", got, tt.badHeaders, err)
			}
		})
	}
	for _, n := range []int64{0, 1, 127, 128, 255, 256, -1, -128, -129, ms, 1<<63 - 1, -1 << 63} {
		if got := springBigInteger(t, bigInteger(n)); got != n {
			t.Errorf("BigInteger round trip of %d: %d", n, got)
		}
	}
}

func equalSets(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, s := range a {
		seen[s]++
	}
	for _, s := range b {
		if seen[s] == 0 {
			return false
		}
		seen[s]--
	}
	return true
}

// TestSpringTakesTurns checks that with NamingSpring a Processor's retry
// consumers are in the groups Spring Kafka gives its retry listeners (the
// main group plus the topic's suffix), so they share committed offsets: a
// record a Spring consumer already handled and committed in T-retry-0 is
// not handled again, the next one is, and its offset is committed there.
func TestSpringTakesTurns(t *testing.T) {
	t.Parallel()
	retry0 := topic + "-retry-0"
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic, retry0, topic+"-retry-1", topic+"-dlt"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	e := &env{c: c, opts: []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}}
	springRecord := func(key string) *kgo.Record {
		return &kgo.Record{Topic: retry0, Key: []byte(key), Headers: []kgo.RecordHeader{
			{Key: "retry_topic-attempts", Value: binary.BigEndian.AppendUint32(nil, 2)},
			{Key: "retry_topic-backoff-timestamp", Value: bigInteger(time.Now().UnixMilli())},
		}}
	}
	e.produce(t, springRecord("handled-by-spring"), springRecord("for-go"))
	// What Spring's listener on orders-retry-0 (group billing-retry-0)
	// commits after handling the first record.
	springGroup := group + "-retry-0"
	offs := make(kadm.Offsets)
	offs.Add(kadm.Offset{Topic: retry0, Partition: 0, At: 1, LeaderEpoch: -1})
	if resp, err := kadm.NewClient(e.client(t)).CommitOffsets(t.Context(), springGroup, offs); err != nil || resp.Error() != nil {
		t.Fatalf("committing as Spring would: %v %v", err, resp.Error())
	}

	j := newJournal()
	e.run(t, kafkaretry.Config{
		Naming: kafkaretry.NamingSpring, Tiers: []time.Duration{50 * time.Millisecond, 50 * time.Millisecond},
		Policy: retry.Policy{MaxAttempts: 3}, Handler: j.handler(func(call) error { return nil }),
	})
	waitFor(t, "for-go handled and committed in "+springGroup, func() bool {
		return len(j.of("for-go")) == 1 && e.committed(t, springGroup, retry0)[0] == 2
	})
	if n := len(j.of("handled-by-spring")); n != 0 {
		t.Errorf("a record Spring's group had committed was handled %d times", n)
	}
}
