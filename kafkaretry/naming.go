package kafkaretry

import (
	"encoding/binary"
	"math"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Naming chooses the names of the retry and dead-letter topics and which
// headers a forwarded record carries; see Config.Naming.
type Naming int

// The namings. The zero value is NamingDefault.
const (
	// NamingDefault: T-retry (tiers T-retry-1 … T-retry-N), T-dlq, and the
	// x- headers only.
	NamingDefault Naming = iota
	// NamingSpring: Spring Kafka's names, T-retry (tiers T-retry-0 …
	// T-retry-(N−1)) and T-dlt, and Spring's retry and DLT headers, in
	// Spring's binary encodings, besides the x- headers, so that a Spring
	// Kafka consumer and a Processor can take turns on the same topics.
	NamingSpring
)

// Spring Kafka's headers, as spring-kafka writes and reads them
// (RetryTopicHeaders, KafkaHeaders, DeadLetterPublishingRecoverer and
// DeadLetterPublishingRecovererFactory); see "Sharing topics with Spring
// Kafka" in the package doc for their encodings.
const (
	SpringHeaderAttempts          = "retry_topic-attempts"
	SpringHeaderBackoffTimestamp  = "retry_topic-backoff-timestamp"
	SpringHeaderOriginalTimestamp = "retry_topic-original-timestamp"
	SpringHeaderOriginalTopic     = "kafka_dlt-original-topic"
	SpringHeaderOriginalPartition = "kafka_dlt-original-partition"
	SpringHeaderOriginalOffset    = "kafka_dlt-original-offset"
	SpringHeaderExceptionFQCN     = "kafka_dlt-exception-fqcn"
	SpringHeaderExceptionMessage  = "kafka_dlt-exception-message"

	// Spring Kafka 3 names the original-record headers of its retry topics
	// kafka_original-…; they are read like the kafka_dlt-… ones.
	springHeaderOriginalTopic3     = "kafka_original-topic"
	springHeaderOriginalPartition3 = "kafka_original-partition"
	springHeaderOriginalOffset3    = "kafka_original-offset"
	springHeaderExceptionFQCN3     = "kafka_exception-fqcn"
	springHeaderExceptionMessage3  = "kafka_exception-message"
)

// springPrefixes are the prefixes of every header Spring's retry topics and
// DeadLetterPublishingRecoverer write. A record's state is rewritten whole
// at each forward, so the Processor drops them all (stack traces, cause
// classes, Spring's own copies): one a previous hop left would describe an
// older attempt, and a reader would take it for the current one.
var springPrefixes = [...]string{"retry_topic-", "kafka_dlt-", "kafka_original-", "kafka_exception-"}

func isSpring(key string) bool {
	for _, p := range springPrefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// names makes topic names from a naming and suffixes; its zero value is the
// default naming.
type names struct {
	spring      bool
	retrySuffix string
	dlqSuffix   string
}

func (c *Config) names() names {
	return newNames(c.Naming, c.RetrySuffix, c.DLQSuffix)
}

func newNames(n Naming, retrySuffix, dlqSuffix string) names {
	return names{spring: n == NamingSpring, retrySuffix: retrySuffix, dlqSuffix: dlqSuffix}
}

func (n names) retryTopic(topic string, tier int) string {
	s := n.retrySuffix
	if s == "" {
		s = "-retry"
	}
	switch {
	case tier <= 0:
		return topic + s
	case n.spring: // Spring numbers its retry topics from 0
		return topic + s + "-" + strconv.Itoa(tier-1)
	}
	return topic + s + "-" + strconv.Itoa(tier)
}

func (n names) dlqTopic(topic string) string {
	switch {
	case n.dlqSuffix != "":
		return topic + n.dlqSuffix
	case n.spring:
		return topic + "-dlt"
	}
	return topic + "-dlq"
}

// retryTopics lists the retry topics for tiers tiers (0: no tiers).
func (n names) retryTopics(topic string, tiers int) []string {
	if tiers == 0 {
		return []string{n.retryTopic(topic, 0)}
	}
	ts := make([]string, tiers)
	for i := range ts {
		ts[i] = n.retryTopic(topic, i+1)
	}
	return ts
}

// javaLong encodes n as Java's BigInteger.toByteArray does: big-endian two's
// complement in the fewest bytes. Spring writes its timestamps so.
func javaLong(n int64) []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(n))
	for len(b) > 1 && (b[0] == 0 && b[1]&0x80 == 0 || b[0] == 0xff && b[1]&0x80 != 0) {
		b = b[1:]
	}
	return b
}

// readJavaLong decodes what javaLong encodes, 1 to 8 bytes, sign-extended.
// A longer value is read as decimal epoch milliseconds, as producers that
// write text put it. (Spring 2.7 wrote an ISO date-time without a zone,
// which says no instant: it reads as malformed, and the record is due now.)
func readJavaLong(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	if len(b) > 8 {
		n, err := strconv.ParseInt(string(b), 10, 64)
		return n, err == nil
	}
	var n int64
	if b[0]&0x80 != 0 {
		n = -1
	}
	for _, c := range b {
		n = n<<8 | int64(c)
	}
	return n, true
}

// javaInt and javaFixedLong are Java's ByteBuffer.putInt and putLong:
// 4 and 8 bytes, big-endian.
func javaInt(n int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(n)) }

func javaFixedLong(n int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(n)) }

// springHeaders returns s in Spring's headers, for a record forwarded with
// NamingSpring. Spring counts attempts from 1 including the one to come, so
// retry_topic-attempts is Attempt+1.
func (s *State) springHeaders() []kgo.RecordHeader {
	hs := make([]kgo.RecordHeader, 0, 8)
	add := func(k string, v []byte) { hs = append(hs, kgo.RecordHeader{Key: k, Value: v}) }
	add(SpringHeaderAttempts, javaInt(int32(min(s.Attempt+1, math.MaxInt32))))
	if !s.ProcessAfter.IsZero() {
		add(SpringHeaderBackoffTimestamp, javaLong(s.ProcessAfter.UnixMilli()))
	}
	if !s.FirstAttempt.IsZero() {
		add(SpringHeaderOriginalTimestamp, javaLong(s.FirstAttempt.UnixMilli()))
	}
	if s.OriginalTopic != "" {
		add(SpringHeaderOriginalTopic, []byte(s.OriginalTopic))
		add(SpringHeaderOriginalPartition, javaInt(s.OriginalPartition))
		add(SpringHeaderOriginalOffset, javaFixedLong(s.OriginalOffset))
	}
	if s.LastErrorType != "" {
		add(SpringHeaderExceptionFQCN, []byte(s.LastErrorType))
	}
	if s.LastErrorMessage != "" {
		add(SpringHeaderExceptionMessage, []byte(s.LastErrorMessage))
	}
	return hs
}
