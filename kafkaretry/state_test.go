package kafkaretry_test

import (
	"errors"
	"math"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/retrykit/retry/kafkaretry"
)

func TestStateRoundTrip(t *testing.T) {
	t.Parallel()
	at := time.UnixMilli(1_700_000_000_123)
	tests := []struct {
		name string
		st   kafkaretry.State
	}{
		{name: "fresh replay", st: kafkaretry.State{Attempt: 0, ProcessAfter: at, FirstAttempt: at, OriginalPartition: -1, OriginalOffset: -1}},
		{name: "everything", st: kafkaretry.State{
			Attempt: 4, ProcessAfter: at.Add(time.Hour), PrevDelay: 1500 * time.Millisecond,
			OriginalTopic: "orders", OriginalPartition: 7, OriginalOffset: math.MaxInt64, FirstAttempt: at,
			LastErrorType: "*kafkaretry.HTTPError", LastErrorMessage: "http status 503", APIStatusCode: 503,
			APIResponse: `{"busy":true}`, DLQReason: "attempts exhausted",
			History: []kafkaretry.Failure{{Attempt: 1, AtMs: at.UnixMilli(), Topic: "orders", Type: "t", Message: "m", Status: 503}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := kafkaretry.ReadState(&kgo.Record{Headers: tt.st.Headers(), Timestamp: at})
			if err != nil {
				t.Fatalf("ReadState: %v", err)
			}
			if !reflect.DeepEqual(got, tt.st) {
				t.Errorf("got  %+v\nwant %+v", got, tt.st)
			}
		})
	}
}

// FuzzReadState feeds ReadState arbitrary header values: it must never
// panic, always return a usable State, report every problem as a
// *HeaderError, and read back exactly the State it was given when the
// headers are well formed.
func FuzzReadState(f *testing.F) {
	f.Add("1", "1700000000000", "250", "1700000000000", `[{"attempt":1}]`, "503", "orders", "3", "42")
	f.Add("", "", "", "", "", "", "", "", "")
	f.Add("-1", "-1", "-1", "-1", "[", "99", "t", "-3", "x")
	f.Add("99999999999999999999", "9223372036854775807", "9223372036854775807", "+7", "null", "1000", "", "2147483648", "9223372036854775808")
	f.Add("0x10", " 5", "1e3", "5 ", `{"attempt":1}`, "200", "é", "0", "0")
	f.Fuzz(func(t *testing.T, attempt, after, prev, first, history, status, origTopic, origPart, origOff string) {
		var hs []kgo.RecordHeader
		for _, kv := range [][2]string{
			{kafkaretry.HeaderRetryAttempt, attempt}, {kafkaretry.HeaderProcessAfter, after},
			{kafkaretry.HeaderPrevDelay, prev}, {kafkaretry.HeaderFirstAttempt, first},
			{kafkaretry.HeaderHistory, history}, {kafkaretry.HeaderAPIStatusCode, status},
			{kafkaretry.HeaderOriginalTopic, origTopic}, {kafkaretry.HeaderOriginalPartition, origPart},
			{kafkaretry.HeaderOriginalOffset, origOff},
		} {
			if kv[1] != "" { // an empty fuzz value stands for a missing header
				hs = append(hs, kgo.RecordHeader{Key: kv[0], Value: []byte(kv[1])})
			}
		}
		st, err := kafkaretry.ReadState(&kgo.Record{Headers: hs, Timestamp: time.UnixMilli(1)})
		if st.Attempt < 0 || st.PrevDelay < 0 || !st.ProcessAfter.IsZero() && st.ProcessAfter.UnixMilli() < 0 {
			t.Fatalf("unusable state %+v", st)
		}
		if n, perr := strconv.ParseInt(attempt, 10, 32); perr == nil && n >= 0 && st.Attempt != int(n) {
			t.Errorf("x-retry-attempt %q read as %d", attempt, st.Attempt)
		}
		for _, e := range joined(err) {
			var he *kafkaretry.HeaderError
			if !errors.As(e, &he) {
				t.Errorf("error %v is not a *HeaderError", e)
			}
		}
		if err != nil {
			return
		}
		again, err := kafkaretry.ReadState(&kgo.Record{Headers: st.Headers(), Timestamp: time.UnixMilli(1)})
		if err != nil {
			t.Fatalf("reading back %+v: %v", st, err)
		}
		if len(st.History) == 0 {
			st.History = nil // Headers writes no history for an empty one
		}
		if !reflect.DeepEqual(again, st) {
			t.Errorf("round trip:\n got  %+v\n want %+v", again, st)
		}
	})
}

// joined returns the errors inside an errors.Join, or err alone.
func joined(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func BenchmarkReadState(b *testing.B) {
	at := time.UnixMilli(1_700_000_000_000)
	st := kafkaretry.State{
		Attempt: 3, ProcessAfter: at, FirstAttempt: at, PrevDelay: time.Second, OriginalTopic: "orders",
		LastErrorType: "*errors.errorString", LastErrorMessage: "flaky downstream",
		History: []kafkaretry.Failure{{Attempt: 1, AtMs: 1, Topic: "orders"}, {Attempt: 2, AtMs: 2, Topic: "orders-retry"}},
	}
	r := &kgo.Record{Headers: append([]kgo.RecordHeader{{Key: "trace-id", Value: []byte("t")}}, st.Headers()...)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := kafkaretry.ReadState(r); err != nil {
			b.Fatal(err)
		}
	}
}
