package backoff_test

import (
	"encoding/json"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/retrykit/retry/backoff"
)

// sec is a whole number of seconds, to keep the tables short.
func sec(s int) time.Duration { return time.Duration(s) * time.Second }

func TestScheduleDelays(t *testing.T) {
	t.Parallel()
	steps := []time.Duration{sec(1), sec(5), sec(30), sec(300)}
	tests := []struct {
		name   string
		policy backoff.Policy
		want   []time.Duration // before retry 1, 2, …
	}{
		{"in order, then the last repeats",
			backoff.Policy{Kind: backoff.Schedule, Delays: steps, Max: time.Hour, Jitter: backoff.NoJitter},
			[]time.Duration{sec(1), sec(5), sec(30), sec(300), sec(300), sec(300)}},
		{"capped at the default max",
			backoff.Policy{Kind: backoff.Schedule, Delays: steps, Jitter: backoff.NoJitter},
			[]time.Duration{sec(1), sec(5), sec(30), sec(30), sec(30)}},
		{"clamped to min and max",
			backoff.Policy{Kind: backoff.Schedule, Delays: steps, Min: sec(2), Max: sec(60), Jitter: backoff.NoJitter},
			[]time.Duration{sec(2), sec(5), sec(30), sec(60), sec(60)}},
		{"one delay",
			backoff.Policy{Kind: backoff.Schedule, Delays: []time.Duration{sec(7)}, Jitter: backoff.NoJitter},
			[]time.Duration{sec(7), sec(7), sec(7)}},
		{"zeros mean at once",
			backoff.Policy{Kind: backoff.Schedule, Delays: []time.Duration{0, 0, sec(1)}, Jitter: backoff.NoJitter},
			[]time.Duration{0, 0, sec(1), sec(1)}},
		{"need not grow",
			backoff.Policy{Kind: backoff.Schedule, Delays: []time.Duration{sec(10), sec(1)}, Jitter: backoff.NoJitter},
			[]time.Duration{sec(10), sec(1), sec(1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := tt.policy.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			var got []time.Duration
			for n := 1; n <= len(tt.want); n++ {
				got = append(got, tt.policy.Delay(n, 0, nil))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("delays = %v, want %v", got, tt.want)
			}
			for _, n := range []int{1_000, 10_000, math.MaxInt} {
				if d := tt.policy.Delay(n, 0, nil); d != tt.want[len(tt.want)-1] {
					t.Errorf("Delay(%d) = %v, want the last, %v", n, d, tt.want[len(tt.want)-1])
				}
			}
		})
	}
}

// TestMaxDoublings follows Cloud Tasks' max_doublings: from 10s with a cap
// of 300s and 3 doublings, 10s, 20s, 40s, 80s, then up by 2^3·10s = 80s a
// retry, 160s, 240s, then the cap.
func TestMaxDoublings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		policy backoff.Policy
		want   []time.Duration
	}{
		{"Cloud Tasks' example",
			backoff.Policy{Base: sec(10), Max: sec(300), MaxDoublings: 3, Jitter: backoff.NoJitter},
			[]time.Duration{sec(10), sec(20), sec(40), sec(80), sec(160), sec(240), sec(300), sec(300)}},
		{"no limit doubles to the cap",
			backoff.Policy{Base: sec(10), Max: sec(300), Jitter: backoff.NoJitter},
			[]time.Duration{sec(10), sec(20), sec(40), sec(80), sec(160), sec(300)}},
		{"one doubling",
			backoff.Policy{Base: sec(1), Max: backoff.None, MaxDoublings: 1, Jitter: backoff.NoJitter},
			[]time.Duration{sec(1), sec(2), sec(4), sec(6), sec(8), sec(10)}},
		{"a multiplier of 3",
			backoff.Policy{Base: sec(1), Multiplier: 3, Max: backoff.None, MaxDoublings: 2, Jitter: backoff.NoJitter},
			[]time.Duration{sec(1), sec(3), sec(9), sec(18), sec(27), sec(36)}},
		{"min raises the first",
			backoff.Policy{Base: sec(1), Min: sec(3), Max: backoff.None, MaxDoublings: 2, Jitter: backoff.NoJitter},
			[]time.Duration{sec(3), sec(3), sec(4), sec(8), sec(12)}},
		{"no base stays zero",
			backoff.Policy{Base: backoff.None, Max: backoff.None, MaxDoublings: 2, Jitter: backoff.NoJitter},
			[]time.Duration{0, 0, 0, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := tt.policy.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			var got []time.Duration
			for n := 1; n <= len(tt.want); n++ {
				got = append(got, tt.policy.Delay(n, 0, nil))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("delays = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestMaxDoublingsFarOut: the linear growth neither overflows nor falls, up
// to the cap or the largest Duration.
func TestMaxDoublingsFarOut(t *testing.T) {
	t.Parallel()
	tests := []struct {
		policy backoff.Policy
		n      int
		want   time.Duration
	}{
		{backoff.Policy{Base: sec(10), Max: sec(300), MaxDoublings: 3, Jitter: backoff.NoJitter}, 10_000, sec(300)},
		{backoff.Policy{Base: sec(1), Max: backoff.None, MaxDoublings: 3, Jitter: backoff.NoJitter}, 10_000, sec(8 * 9_997)},
		{backoff.Policy{Base: sec(1), Multiplier: 1.5, Max: backoff.None, MaxDoublings: 2, Jitter: backoff.NoJitter}, 10_000, 2250 * time.Millisecond * 9_998},
		{backoff.Policy{Base: sec(1), Max: backoff.None, MaxDoublings: 3, Jitter: backoff.NoJitter}, math.MaxInt, math.MaxInt64},
		{backoff.Policy{Base: sec(1), Max: backoff.None, MaxDoublings: 62, Jitter: backoff.NoJitter}, 64, math.MaxInt64},
		{backoff.Policy{Base: 1, Max: backoff.None, MaxDoublings: 61, Jitter: backoff.NoJitter}, 64, 3 << 61},
	}
	for _, tt := range tests {
		if got := tt.policy.Delay(tt.n, 0, nil); got != tt.want {
			t.Errorf("%+v: Delay(%d) = %v, want %v", tt.policy, tt.n, got, tt.want)
		}
	}
}

// TestScheduleJitterBounds: jitter applies to each scheduled delay as to any
// other kind's, within the bounds of its formula, then the clamp.
func TestScheduleJitterBounds(t *testing.T) {
	t.Parallel()
	steps := []time.Duration{sec(1), sec(5), sec(30)}
	type bounds func(d time.Duration) (lo, hi time.Duration)
	tests := []struct {
		jitter backoff.Jitter
		bounds bounds
	}{
		{backoff.FullJitter, func(d time.Duration) (time.Duration, time.Duration) { return 0, d }},
		{backoff.EqualJitter, func(d time.Duration) (time.Duration, time.Duration) { return d / 2, d }},
		{backoff.ProportionalJitter, func(d time.Duration) (time.Duration, time.Duration) { return d * 9 / 10, d * 11 / 10 }},
	}
	for _, tt := range tests {
		p := backoff.Policy{Kind: backoff.Schedule, Delays: steps, Min: 1500 * time.Millisecond, Max: sec(20), Jitter: tt.jitter}
		seq := backoff.NewSequence(p, fixedSource(0))
		for n := 1; n <= 5; n++ {
			d := steps[min(n, len(steps))-1]
			lo, hi := tt.bounds(min(d, p.Max))
			lo, hi = min(max(lo, p.Min), p.Max), min(max(hi, p.Min), p.Max)
			for _, u := range []uint64{0, 1 << 63, math.MaxUint64} {
				if got := p.Delay(n, 0, fixedSource(u)); got < lo || got > hi {
					t.Errorf("%v: Delay(%d) with u=%#x = %v, outside [%v, %v]", tt.jitter, n, u, got, lo, hi)
				}
			}
			if got := seq.Next(); got < lo || got > hi {
				t.Errorf("%v: the sequence's delay %d = %v, outside [%v, %v]", tt.jitter, n, got, lo, hi)
			}
		}
	}
}

func TestScheduleAndMaxDoublingsValidate(t *testing.T) {
	t.Parallel()
	many := make([]time.Duration, backoff.MaxScheduleDelays+1)
	tests := []struct {
		name   string
		policy backoff.Policy
		want   []string // "field: reason"
	}{
		{"schedule", backoff.Policy{Kind: backoff.Schedule, Delays: []time.Duration{0, sec(1)}}, nil},
		{"schedule at the longest", backoff.Policy{Kind: backoff.Schedule, Delays: many[1:]}, nil},
		{"schedule of none", backoff.Policy{Kind: backoff.Schedule},
			[]string{"delaysMs: SCHEDULE needs at least one delay"}},
		{"schedule too long", backoff.Policy{Kind: backoff.Schedule, Delays: many},
			[]string{"delaysMs: must list at most 100 delays"}},
		{"negative entries", backoff.Policy{Kind: backoff.Schedule, Delays: []time.Duration{sec(1), -1, sec(2), -sec(3)}},
			[]string{"delaysMs: [1] must not be negative", "delaysMs: [3] must not be negative"}},
		{"delays of another kind", backoff.Policy{Kind: backoff.Fixed, Delays: []time.Duration{sec(1)}},
			[]string{"delaysMs: is only for backoff SCHEDULE"}},
		{"an empty list of another kind", backoff.Policy{Delays: []time.Duration{}}, nil},
		{"max doublings", backoff.Policy{MaxDoublings: 5}, nil},
		{"max doublings negative", backoff.Policy{MaxDoublings: -1},
			[]string{"maxDoublings: must not be negative"}},
		{"max doublings of another kind", backoff.Policy{Kind: backoff.Schedule, Delays: []time.Duration{sec(1)}, MaxDoublings: 2},
			[]string{"maxDoublings: is only for backoff EXPONENTIAL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.policy.Validate()
			var got []string
			for _, fe := range backoff.FieldErrors(err) {
				got = append(got, fe.Error())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Validate = %q, want %q", got, tt.want)
			}
			if valid := tt.policy.Valid(); valid != (err == nil) {
				t.Errorf("Valid = %v, Validate = %v", valid, err)
			}
		})
	}
}

func TestScheduleJSON(t *testing.T) {
	t.Parallel()
	var p backoff.Policy
	in := `{"backoff":"SCHEDULE","delaysMs":[1000,5000,30000,300000],"maxDelayMs":600000,"jitterType":"NONE"}`
	if err := json.Unmarshal([]byte(in), &p); err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	if want := []time.Duration{sec(1), sec(5), sec(30), sec(300)}; p.Kind != backoff.Schedule || !slices.Equal(p.Delays, want) {
		t.Fatalf("decoded %v %v, want SCHEDULE %v", p.Kind, p.Delays, want)
	}
	out, err := json.Marshal(p)
	want := `{"backoff":"SCHEDULE","delaysMs":[1000,5000,30000,300000],"initialDelayMs":100,"multiplier":2,"incrementMs":100,"minDelayMs":0,"maxDelayMs":600000,"jitterType":"NONE","jitterFactor":0.1}`
	if err != nil || string(out) != want {
		t.Errorf("Marshal = %s, %v; want %s", out, err, want)
	}

	in = `{"initialDelayMs":10000,"maxDelayMs":300000,"maxDoublings":3}`
	p = backoff.Policy{}
	if err := json.Unmarshal([]byte(in), &p); err != nil || p.MaxDoublings != 3 {
		t.Fatalf("Unmarshal(%s) = %+v, %v", in, p, err)
	}
	out, err = json.Marshal(p)
	want = `{"backoff":"EXPONENTIAL","initialDelayMs":10000,"multiplier":2,"maxDoublings":3,"incrementMs":10000,"minDelayMs":0,"maxDelayMs":300000,"jitterType":"FULL","jitterFactor":0.1}`
	if err != nil || string(out) != want {
		t.Errorf("Marshal = %s, %v; want %s", out, err, want)
	}
	// maxDoublings 0 is no limit, the default, and is not written.
	if err := json.Unmarshal([]byte(`{"maxDoublings":0}`), &p); err != nil || p.MaxDoublings != 0 {
		t.Errorf("maxDoublings 0: %+v, %v", p, err)
	}
}

// FuzzScheduleJSON: every valid schedule or limited exponential policy
// survives a round trip: the decoded policy gives the same delays and
// encodes to the same bytes.
func FuzzScheduleJSON(f *testing.F) {
	f.Add(uint8(4), uint8(1), int64(time.Second), int64(5*time.Second), int64(-1), 3, 0, int64(0), int64(0))
	f.Add(uint8(0), uint8(0), int64(10*time.Second), int64(0), int64(0), 0, 3, int64(0), int64(300*time.Second))
	f.Add(uint8(0), uint8(2), int64(math.MaxInt64), int64(1), int64(7), 0, 62, int64(1), int64(-1))
	f.Add(uint8(4), uint8(3), int64(1234567), int64(math.MaxInt64), int64(0), 100, 0, int64(time.Millisecond), int64(-1))
	f.Fuzz(func(t *testing.T, kind, jitter uint8, d0, d1, d2 int64, reps, doublings int, minD, maxD int64) {
		p := backoff.Policy{
			Kind: backoff.Kind(kind % 5), Jitter: backoff.Jitter(jitter % 5),
			Base: time.Duration(d0), MaxDoublings: doublings, Min: time.Duration(minD), Max: time.Duration(maxD),
		}
		if p.Kind == backoff.Schedule {
			p.Delays = []time.Duration{time.Duration(d0), time.Duration(d1)}
			for range reps % (backoff.MaxScheduleDelays + 2) {
				p.Delays = append(p.Delays, time.Duration(d2))
			}
		}
		data, err := json.Marshal(p)
		if p.Kind == backoff.Custom || p.Validate() != nil {
			if err == nil {
				t.Fatalf("%+v is invalid or custom, yet encodes as %s", p, data)
			}
			return
		}
		if err != nil {
			t.Fatalf("Marshal(%+v): %v", p, err)
		}
		checkRoundTrip(t, p)
	})
}
