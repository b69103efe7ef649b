package kafkaretry

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The header names of the retry state, as DESIGN.md fixes them, plus
// HeaderPrevDelay, HeaderHistory and HeaderDLQReason.
const (
	HeaderRetryAttempt      = "x-retry-attempt"
	HeaderProcessAfter      = "x-process-after"
	HeaderPrevDelay         = "x-retry-prev-delay-ms"
	HeaderOriginalTopic     = "x-original-topic"
	HeaderOriginalPartition = "x-original-partition"
	HeaderOriginalOffset    = "x-original-offset"
	HeaderFirstAttempt      = "x-first-attempt-timestamp"
	HeaderLastErrorType     = "x-last-error-type"
	HeaderLastErrorMessage  = "x-last-error-message"
	HeaderAPIStatusCode     = "x-api-status-code"
	HeaderAPIResponse       = "x-api-response"
	HeaderHistory           = "x-retry-history"
	HeaderDLQReason         = "x-dlq-reason"
	// HeaderReplays counts the times Replay republished the record's
	// chain; absent means 0.
	HeaderReplays = "x-replays"
	// HeaderRecordID is the record's identity, ID.String(): what a
	// consumer of a retry or dead-letter topic dedupes on.
	HeaderRecordID = "x-record-id"
)

// Limits on what the headers carry, so that a long error or response body
// cannot make a record too large for the broker.
const (
	// MaxErrorBytes caps x-last-error-message and x-api-response.
	MaxErrorBytes = 1024
	// MaxHistory caps the failures kept in x-retry-history (the latest are kept).
	MaxHistory = 16
	// maxHistoryMessage caps each failure's message inside the history.
	maxHistoryMessage = 200
	// maxHistoryBytes is the largest x-retry-history ReadState parses.
	maxHistoryBytes = 64 << 10
)

// ours lists the headers the package owns: they are stripped from a record
// before its state is written again, so none is ever repeated.
var ours = [...]string{
	HeaderRetryAttempt, HeaderProcessAfter, HeaderPrevDelay, HeaderOriginalTopic,
	HeaderOriginalPartition, HeaderOriginalOffset, HeaderFirstAttempt, HeaderLastErrorType,
	HeaderLastErrorMessage, HeaderAPIStatusCode, HeaderAPIResponse, HeaderHistory, HeaderDLQReason,
	HeaderReplays, HeaderRecordID,
}

// isOurs reports whether the header key carries retry state: one of ours,
// or one of Spring's, which ReadState reads too.
func isOurs(key string) bool {
	for _, k := range ours {
		if k == key {
			return true
		}
	}
	return isSpring(key)
}

// State is the retry state a record carries in its headers. The zero State
// means "no header": Headers writes only the fields that are set (a
// non-empty string, a non-zero time, a positive number; original partition
// and offset when OriginalTopic is set; Attempt always).
type State struct {
	Attempt           int           // attempts made so far, ≥ 0
	ProcessAfter      time.Time     // not handled before; zero means due now
	PrevDelay         time.Duration // the previous backoff delay, ≥ 0
	OriginalTopic     string        // "" when unknown
	OriginalPartition int32
	OriginalOffset    int64
	FirstAttempt      time.Time // when attempt 1 began
	LastErrorType     string
	LastErrorMessage  string
	APIStatusCode     int // 0 when none
	APIResponse       string
	History           []Failure
	DLQReason         string
	Replays           int // times Replay republished this chain
}

// ID is the identity of a record's chain: the topic, partition and offset
// of the original record, the one first consumed, and how many times Replay
// republished it. Every retry and dead-letter copy of a record carries it
// (x-original-topic, -partition, -offset, x-replays, and all in one as
// x-record-id); two records with the same ID are copies of one failure, so
// a consumer of a retry or dead-letter topic dedupes on it.
type ID struct {
	Topic     string
	Partition int32
	Offset    int64
	Replays   int
}

// String returns "topic/partition/offset", with "/rN" after N replays.
func (id ID) String() string {
	s := id.Topic + "/" + strconv.FormatInt(int64(id.Partition), 10) + "/" + strconv.FormatInt(id.Offset, 10)
	if id.Replays > 0 {
		s += "/r" + strconv.Itoa(id.Replays)
	}
	return s
}

// RecordID returns the identity of r's chain: from its state headers (the
// x- ones, else Spring's), or r's own topic, partition and offset when it
// carries none, as a record of the main topic does.
func RecordID(r *kgo.Record) ID {
	st, _ := ReadState(r)
	return st.id(r)
}

func (s *State) id(r *kgo.Record) ID {
	if s.OriginalTopic == "" || s.OriginalPartition < 0 || s.OriginalOffset < 0 {
		return ID{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Replays: s.Replays}
	}
	return ID{Topic: s.OriginalTopic, Partition: s.OriginalPartition, Offset: s.OriginalOffset, Replays: s.Replays}
}

// Failure is one failed attempt in x-retry-history.
type Failure struct {
	Attempt int    `json:"attempt"`
	AtMs    int64  `json:"at"`    // epoch ms when it failed
	Topic   string `json:"topic"` // the topic it was handled from
	Type    string `json:"type"`
	Message string `json:"message"`
	Status  int    `json:"status,omitempty"`
}

// HeaderError is one header that ReadState could not use: Value is what the
// record carried (nil when the header was missing) and Rule the value used
// instead.
type HeaderError struct {
	Header string
	Value  []byte
	Reason string
	Rule   string
}

// Error says which header, what it held and the rule applied instead.
func (e *HeaderError) Error() string {
	if e.Value == nil {
		return "header " + e.Header + " missing; " + e.Rule
	}
	return fmt.Sprintf("header %s %q: %s; %s", e.Header, e.Value, e.Reason, e.Rule)
}

// ReadState parses the retry state from r's headers, for a record of a retry
// or DLQ topic. It never panics: each header that is missing or malformed is
// replaced by the package's rule (see "Bad headers" in the package doc) and
// reported as a *HeaderError, all of them joined in the error; the State is
// usable either way. It does not apply the rules that depend on a Policy
// (the cap on Attempt, Config.MaxHold): the Processor does. Spring Kafka's
// headers are read too, whatever the Naming, and win over the x- ones they
// duplicate (see "Sharing topics with Spring Kafka" in the package doc).
func ReadState(r *kgo.Record) (State, error) {
	last := make(map[string][]byte, len(ours))
	for _, h := range r.Headers {
		if isOurs(h.Key) {
			v := h.Value
			if v == nil {
				v = []byte{}
			}
			last[h.Key] = v
		}
	}
	var errs []error
	bad := func(name, reason, rule string) {
		errs = append(errs, &HeaderError{Header: name, Value: last[name], Reason: reason, Rule: rule})
	}
	num := func(name string, lo, hi int64, required bool, rule string) (int64, bool) {
		v, ok := last[name]
		if !ok {
			if required {
				bad(name, "missing", rule)
			}
			return 0, false
		}
		n, err := strconv.ParseInt(string(v), 10, 64)
		switch {
		case err != nil:
			bad(name, "not a whole number in range", rule)
		case n < lo:
			bad(name, "below "+strconv.FormatInt(lo, 10), rule)
		case n > hi:
			bad(name, "above "+strconv.FormatInt(hi, 10), rule)
		default:
			return n, true
		}
		return 0, false
	}

	// Spring's headers, when a record has them, say the same as ours in
	// Spring's encodings; Spring Kafka rewrites them at each hop but copies
	// ours along unchanged, so where both are present Spring's are the
	// newer and win.
	sp := func(name string) ([]byte, bool) { v, ok := last[name]; return v, ok }
	springBad := func(name, rule string) {
		errs = append(errs, &HeaderError{Header: name, Value: last[name], Reason: "not in Spring's encoding", Rule: rule})
	}

	s := State{Attempt: 1, OriginalPartition: -1, OriginalOffset: -1, FirstAttempt: r.Timestamp}
	if v, ok := sp(SpringHeaderAttempts); ok {
		// Spring counts the attempt to come: 2 on the first retry. Its
		// reader takes 1 byte (older Spring) or a 4-byte int.
		n := int64(-1)
		switch len(v) {
		case 1:
			n = int64(v[0])
		case 4:
			n = int64(int32(binary.BigEndian.Uint32(v)))
		}
		if n >= 1 {
			s.Attempt = int(n - 1)
		} else {
			springBad(SpringHeaderAttempts, "counting 1 attempt made")
		}
	} else if n, ok := num(HeaderRetryAttempt, 0, math.MaxInt32, true, "counting 1 attempt made"); ok {
		s.Attempt = int(n)
	}
	if v, ok := sp(SpringHeaderBackoffTimestamp); ok {
		if n, ok := readJavaLong(v); ok && n >= 0 {
			s.ProcessAfter = time.UnixMilli(n)
		} else {
			springBad(SpringHeaderBackoffTimestamp, "due now")
		}
	} else if n, ok := num(HeaderProcessAfter, 0, math.MaxInt64, true, "due now"); ok {
		s.ProcessAfter = time.UnixMilli(n)
	}
	if n, ok := num(HeaderPrevDelay, 0, math.MaxInt64/int64(time.Millisecond), false, "using 0"); ok {
		s.PrevDelay = time.Duration(n) * time.Millisecond
	}
	if v, ok := sp(SpringHeaderOriginalTimestamp); ok && last[HeaderFirstAttempt] == nil {
		if n, ok := readJavaLong(v); ok && n >= 0 {
			s.FirstAttempt = time.UnixMilli(n)
		} else {
			springBad(SpringHeaderOriginalTimestamp, "using the record's timestamp")
		}
	} else if n, ok := num(HeaderFirstAttempt, 0, math.MaxInt64, true, "using the record's timestamp"); ok {
		s.FirstAttempt = time.UnixMilli(n)
	}
	if n, ok := num(HeaderReplays, 0, math.MaxInt32, false, "using 0"); ok {
		s.Replays = int(n)
	}
	// A partition and offset mean nothing without the topic they are in.
	if s.OriginalTopic = string(last[HeaderOriginalTopic]); s.OriginalTopic != "" {
		if n, ok := num(HeaderOriginalPartition, 0, math.MaxInt32, true, "unknown"); ok {
			s.OriginalPartition = int32(n)
		}
		if n, ok := num(HeaderOriginalOffset, 0, math.MaxInt64, true, "unknown"); ok {
			s.OriginalOffset = n
		}
	} else {
		s.readSpringOriginal(last, springBad)
	}
	if n, ok := num(HeaderAPIStatusCode, 100, 999, false, "no status"); ok {
		s.APIStatusCode = int(n)
	}
	s.LastErrorType = string(firstOf(last, HeaderLastErrorType, SpringHeaderExceptionFQCN, springHeaderExceptionFQCN3))
	s.LastErrorMessage = string(firstOf(last, HeaderLastErrorMessage, SpringHeaderExceptionMessage, springHeaderExceptionMessage3))
	s.APIResponse = string(last[HeaderAPIResponse])
	s.DLQReason = string(last[HeaderDLQReason])
	if v, ok := last[HeaderHistory]; ok {
		switch {
		case len(v) > maxHistoryBytes:
			bad(HeaderHistory, "too long", "starting a new history")
		case json.Unmarshal(v, &s.History) != nil:
			s.History = nil
			bad(HeaderHistory, "not a JSON list of failures", "starting a new history")
		}
	}
	return s, errors.Join(errs...)
}

// readSpringOriginal reads the original record's topic, partition (a 4-byte
// int) and offset (an 8-byte long) from Spring's DLT headers, or from
// Spring 3's kafka_original-… ones.
func (s *State) readSpringOriginal(last map[string][]byte, bad func(name, rule string)) {
	for _, h := range [...][3]string{
		{SpringHeaderOriginalTopic, SpringHeaderOriginalPartition, SpringHeaderOriginalOffset},
		{springHeaderOriginalTopic3, springHeaderOriginalPartition3, springHeaderOriginalOffset3},
	} {
		t := string(last[h[0]])
		if t == "" {
			continue
		}
		s.OriginalTopic = t
		if v := last[h[1]]; len(v) == 4 && int32(binary.BigEndian.Uint32(v)) >= 0 {
			s.OriginalPartition = int32(binary.BigEndian.Uint32(v))
		} else {
			bad(h[1], "unknown")
		}
		if v := last[h[2]]; len(v) == 8 && int64(binary.BigEndian.Uint64(v)) >= 0 {
			s.OriginalOffset = int64(binary.BigEndian.Uint64(v))
		} else {
			bad(h[2], "unknown")
		}
		return
	}
}

// firstOf returns the value of the first of keys that last holds.
func firstOf(last map[string][]byte, keys ...string) []byte {
	for _, k := range keys {
		if v, ok := last[k]; ok {
			return v
		}
	}
	return nil
}

// Headers returns s as record headers, in a fixed order, each at most once.
// ProcessAfter, PrevDelay, FirstAttempt and the history's times are written
// in whole milliseconds.
func (s *State) Headers() []kgo.RecordHeader {
	hs := make([]kgo.RecordHeader, 0, len(ours))
	add := func(k, v string) { hs = append(hs, kgo.RecordHeader{Key: k, Value: []byte(v)}) }
	ms := func(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }
	add(HeaderRetryAttempt, strconv.Itoa(s.Attempt))
	if !s.ProcessAfter.IsZero() {
		add(HeaderProcessAfter, ms(s.ProcessAfter))
	}
	if s.PrevDelay > 0 {
		add(HeaderPrevDelay, strconv.FormatInt(s.PrevDelay.Milliseconds(), 10))
	}
	if s.OriginalTopic != "" {
		add(HeaderOriginalTopic, s.OriginalTopic)
		add(HeaderOriginalPartition, strconv.FormatInt(int64(s.OriginalPartition), 10))
		add(HeaderOriginalOffset, strconv.FormatInt(s.OriginalOffset, 10))
	}
	if !s.FirstAttempt.IsZero() {
		add(HeaderFirstAttempt, ms(s.FirstAttempt))
	}
	if s.LastErrorType != "" {
		add(HeaderLastErrorType, s.LastErrorType)
	}
	if s.LastErrorMessage != "" {
		add(HeaderLastErrorMessage, s.LastErrorMessage)
	}
	if s.APIStatusCode > 0 {
		add(HeaderAPIStatusCode, strconv.Itoa(s.APIStatusCode))
	}
	if s.APIResponse != "" {
		add(HeaderAPIResponse, s.APIResponse)
	}
	if len(s.History) > 0 {
		b, _ := json.Marshal(s.History) // a slice of plain structs always encodes
		add(HeaderHistory, string(b))
	}
	if s.DLQReason != "" {
		add(HeaderDLQReason, s.DLQReason)
	}
	if s.Replays > 0 {
		add(HeaderReplays, strconv.Itoa(s.Replays))
	}
	if s.OriginalTopic != "" {
		add(HeaderRecordID, ID{Topic: s.OriginalTopic, Partition: s.OriginalPartition, Offset: s.OriginalOffset, Replays: s.Replays}.String())
	}
	return hs
}

// withState returns the user's headers of r followed by s's, and Spring's
// rendering of s too when spring is set.
func withState(r *kgo.Record, s *State, spring bool) []kgo.RecordHeader {
	hs := append(userHeaders(r, len(ours)+8), s.Headers()...)
	if spring {
		hs = append(hs, s.springHeaders()...)
	}
	return hs
}

// userHeaders returns the headers of r the package does not own, in their
// order, with room for extra more.
func userHeaders(r *kgo.Record, extra int) []kgo.RecordHeader {
	hs := make([]kgo.RecordHeader, 0, len(r.Headers)+extra)
	for _, h := range r.Headers {
		if !isOurs(h.Key) {
			hs = append(hs, h)
		}
	}
	return hs
}
