package backoff_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/retrykit/retry/backoff"
)

// fixedSource returns the same bits every time, so a draw is a known u.
type fixedSource uint64

func (f fixedSource) Uint64() uint64 { return uint64(f) }

// The draws the table tests pin: u = 0, u = 0.5 and u just under 1.
var draws = []struct {
	name string
	src  fixedSource
	u    float64
}{
	{"u=0", 0, 0},
	{"u=0.5", 1 << 63, 0.5},
	{"u≈1", math.MaxUint64, 1 - 0x1p-53},
}

// reference computes DESIGN.md's formulas as literally as possible, in
// float64 nanoseconds, for comparison with the engine. It resolves the
// defaults itself, field by field: a zero Base is 100ms, a negative one 0; a
// zero Max is 30s, a negative one no cap; a zero Increment is the Base.
func reference(p backoff.Policy, n int, prev time.Duration, u float64) float64 {
	base, maxD, minD := float64(p.Base), float64(p.Max), float64(p.Min)
	switch {
	case p.Base == 0:
		base = float64(100 * time.Millisecond)
	case p.Base < 0:
		base = 0
	}
	switch {
	case p.Max == 0:
		maxD = float64(30 * time.Second)
	case p.Max < 0:
		maxD = math.Inf(1)
	}
	var raw float64
	switch p.Kind {
	case backoff.Fixed:
		raw = base
	case backoff.Linear:
		inc := float64(p.Increment)
		switch {
		case p.Increment == 0:
			inc = base
		case p.Increment < 0:
			inc = 0
		}
		raw = base + inc*float64(n-1)
	case backoff.Exponential:
		m := p.Multiplier
		if m == 0 {
			m = 2
		}
		if d := p.MaxDoublings; d > 0 && n-1 > d {
			raw = base * math.Pow(m, float64(d)) * float64(n-d)
		} else {
			raw = base * math.Pow(m, float64(n-1))
		}
	case backoff.Schedule:
		raw = float64(p.Delays[min(n, len(p.Delays))-1])
	case backoff.Custom:
		raw = float64(p.Func(n))
	}
	d := math.Min(raw, maxD)
	var out float64
	switch p.Jitter {
	case backoff.NoJitter:
		out = d
	case backoff.FullJitter:
		out = u * d
	case backoff.EqualJitter:
		out = d/2 + u*d/2
	case backoff.ProportionalJitter:
		f := p.JitterFactor
		if f == 0 {
			f = 0.1
		}
		out = d * (1 + (2*u-1)*f)
	case backoff.DecorrelatedJitter:
		pv := float64(prev)
		if prev == 0 {
			pv = base
		}
		hi := math.Max(math.Min(maxD, pv*3), base)
		out = base + u*(hi-base)
	case backoff.CustomJitter:
		out = float64(p.JitterFunc(time.Duration(d), nil))
	}
	return math.Min(math.Max(out, minD), maxD)
}

func TestDelayMatchesFormulas(t *testing.T) {
	t.Parallel()
	kinds := map[string]backoff.Policy{
		"fixed":           {Kind: backoff.Fixed, Base: 300 * time.Millisecond},
		"linear":          {Kind: backoff.Linear, Base: 100 * time.Millisecond},
		"linear+inc":      {Kind: backoff.Linear, Base: 100 * time.Millisecond, Increment: 250 * time.Millisecond},
		"exponential":     {Kind: backoff.Exponential, Base: 50 * time.Millisecond},
		"default base":    {},
		"multiplier only": {Multiplier: 3},
		"no base":         {Kind: backoff.Linear, Base: backoff.None, Increment: 30 * time.Millisecond},
		"no increment":    {Kind: backoff.Linear, Base: 40 * time.Millisecond, Increment: backoff.None},
		"exponential×3":   {Kind: backoff.Exponential, Base: 10 * time.Millisecond, Multiplier: 3},
		"exponential×1.5": {Kind: backoff.Exponential, Base: 70 * time.Millisecond, Multiplier: 1.5},
		"max doublings":   {Kind: backoff.Exponential, Base: 20 * time.Millisecond, MaxDoublings: 3},
		"max doublings×3": {Kind: backoff.Exponential, Base: 10 * time.Millisecond, Multiplier: 3, MaxDoublings: 2},
		"schedule":        {Kind: backoff.Schedule, Base: 30 * time.Millisecond, Delays: []time.Duration{0, 50 * time.Millisecond, 20 * time.Millisecond, 400 * time.Millisecond, 900 * time.Millisecond}},
		"custom":          {Kind: backoff.Custom, Base: 25 * time.Millisecond, Func: func(n int) time.Duration { return time.Duration(n*n) * 40 * time.Millisecond }},
	}
	jitters := map[string]func(*backoff.Policy){
		"none":           func(p *backoff.Policy) { p.Jitter = backoff.NoJitter },
		"full":           func(p *backoff.Policy) { p.Jitter = backoff.FullJitter },
		"equal":          func(p *backoff.Policy) { p.Jitter = backoff.EqualJitter },
		"proportional":   func(p *backoff.Policy) { p.Jitter = backoff.ProportionalJitter },
		"proportional.5": func(p *backoff.Policy) { p.Jitter, p.JitterFactor = backoff.ProportionalJitter, 0.5 },
		"decorrelated":   func(p *backoff.Policy) { p.Jitter = backoff.DecorrelatedJitter },
		"custom": func(p *backoff.Policy) {
			p.Jitter = backoff.CustomJitter
			p.JitterFunc = func(d time.Duration, _ backoff.Source) time.Duration { return d/3 + 7*time.Millisecond }
		},
	}
	bounds := map[string]func(*backoff.Policy){
		"default cap": func(*backoff.Policy) {},
		"no cap":      func(p *backoff.Policy) { p.Max = backoff.None },
		"min+no cap":  func(p *backoff.Policy) { p.Min, p.Max = 120*time.Millisecond, -time.Hour },
		"max":         func(p *backoff.Policy) { p.Max = 700 * time.Millisecond },
		"min":         func(p *backoff.Policy) { p.Min = 120 * time.Millisecond },
		"min+max":     func(p *backoff.Policy) { p.Min, p.Max = 120*time.Millisecond, 700*time.Millisecond },
	}
	for kname, kind := range kinds {
		for jname, setJitter := range jitters {
			for bname, setBounds := range bounds {
				p := kind
				setJitter(&p)
				setBounds(&p)
				if err := p.Validate(); err != nil {
					if p.Base < 0 && p.Jitter == backoff.DecorrelatedJitter {
						continue // decorrelated jitter grows from the base: no base, no policy
					}
					t.Fatalf("%s/%s/%s: invalid policy: %v", kname, jname, bname, err)
				}
				for _, draw := range draws {
					prev := time.Duration(0)
					for n := 1; n <= 12; n++ {
						got := p.Delay(n, prev, draw.src)
						want := reference(p, n, prev, draw.u)
						if math.Abs(float64(got)-want) > 2 { // the engine truncates the raw delay, then the jittered one
							t.Errorf("%s/%s/%s/%s: Delay(%d, prev=%v) = %v, want %v",
								kname, jname, bname, draw.name, n, prev, got, time.Duration(want))
						}
						prev = got
					}
				}
			}
		}
	}
}

func TestDelayKnownValues(t *testing.T) {
	t.Parallel()
	half := fixedSource(1 << 63)
	tests := []struct {
		name   string
		policy backoff.Policy
		n      int
		prev   time.Duration
		want   time.Duration
	}{
		{"exponential doubles", backoff.Policy{Base: 100 * time.Millisecond, Jitter: backoff.NoJitter}, 4, 0, 800 * time.Millisecond},
		{"exponential capped", backoff.Policy{Base: 100 * time.Millisecond, Max: time.Second, Jitter: backoff.NoJitter}, 5, 0, time.Second},
		{"linear steps by base", backoff.Policy{Kind: backoff.Linear, Base: 100 * time.Millisecond, Jitter: backoff.NoJitter}, 3, 0, 300 * time.Millisecond},
		{"full jitter halves at u=.5", backoff.Policy{Kind: backoff.Fixed, Base: time.Second}, 9, 0, 500 * time.Millisecond},
		{"equal jitter at u=.5", backoff.Policy{Kind: backoff.Fixed, Base: time.Second, Jitter: backoff.EqualJitter}, 1, 0, 750 * time.Millisecond},
		{"decorrelated from base", backoff.Policy{Base: 10 * time.Millisecond, Jitter: backoff.DecorrelatedJitter}, 1, 0, 20 * time.Millisecond},
		{"decorrelated from prev", backoff.Policy{Base: 10 * time.Millisecond, Jitter: backoff.DecorrelatedJitter}, 2, 40 * time.Millisecond, 65 * time.Millisecond},
		{"decorrelated capped", backoff.Policy{Base: 10 * time.Millisecond, Max: 50 * time.Millisecond, Jitter: backoff.DecorrelatedJitter}, 2, 40 * time.Millisecond, 30 * time.Millisecond},
		{"min raises", backoff.Policy{Kind: backoff.Fixed, Base: 10 * time.Millisecond, Min: 8 * time.Millisecond}, 1, 0, 8 * time.Millisecond},
		{"n below 1 counts as 1", backoff.Policy{Base: 100 * time.Millisecond, Jitter: backoff.NoJitter}, -5, 0, 100 * time.Millisecond},
		{"base None is zero", backoff.Policy{Kind: backoff.Fixed, Base: backoff.None, Jitter: backoff.NoJitter}, 3, 0, 0},
		{"negative base is None", backoff.Policy{Base: -time.Second, Jitter: backoff.NoJitter}, 3, 0, 0},
		{"zero policy is Default", backoff.Policy{}, 3, 0, 200 * time.Millisecond},
		{"zero base is the default", backoff.Policy{Kind: backoff.Fixed, Jitter: backoff.NoJitter}, 3, 0, 100 * time.Millisecond},
		{"zero max is the default cap", backoff.Policy{Base: time.Second, Jitter: backoff.NoJitter}, 6, 0, 30 * time.Second},
		{"max None is no cap", backoff.Policy{Base: time.Second, Max: backoff.None, Jitter: backoff.NoJitter}, 21, 0, 1 << 20 * time.Second},
		{"increment None never grows", backoff.Policy{Kind: backoff.Linear, Base: time.Second, Increment: backoff.None, Jitter: backoff.NoJitter}, 9, 0, time.Second},
		{"zero increment is the default base", backoff.Policy{Kind: backoff.Linear, Jitter: backoff.NoJitter}, 9, 0, 900 * time.Millisecond},
		{"multiplier alone keeps the base", backoff.Policy{Multiplier: 3}, 3, 0, 450 * time.Millisecond},
		{"multiplier alone keeps the cap", backoff.Policy{Multiplier: 3}, 8, 0, 15 * time.Second},
		{"min alone keeps the base", backoff.Policy{Min: 30 * time.Millisecond}, 1, 0, 50 * time.Millisecond},
		{"decorrelated from the default base", backoff.Policy{Jitter: backoff.DecorrelatedJitter}, 1, 0, 200 * time.Millisecond},
		{"decorrelated under the default cap", backoff.Policy{Jitter: backoff.DecorrelatedJitter}, 2, 25 * time.Second, 15050 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.policy.Delay(tt.n, tt.prev, half); got != tt.want {
				t.Errorf("Delay(%d, %v) = %v, want %v", tt.n, tt.prev, got, tt.want)
			}
		})
	}
}

// TestFieldByFieldDefaults pins the rule that each zero field takes its own
// default whatever the others hold: setting one field keeps the default base
// (100ms) and the default cap (30s).
func TestFieldByFieldDefaults(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	tests := []struct {
		name   string
		policy backoff.Policy
		raw    []time.Duration // Raw(1), Raw(2), …
	}{
		{"zero policy", backoff.Policy{}, []time.Duration{100 * ms, 200 * ms, 400 * ms}},
		{"jitter NONE alone", backoff.Policy{Jitter: backoff.NoJitter}, []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 6400 * ms, 12800 * ms, 25600 * ms, 30000 * ms, 30000 * ms}},
		{"multiplier 3 alone", backoff.Policy{Multiplier: 3}, []time.Duration{100 * ms, 300 * ms, 900 * ms, 2700 * ms, 8100 * ms, 24300 * ms, 30000 * ms}},
		{"linear alone", backoff.Policy{Kind: backoff.Linear}, []time.Duration{100 * ms, 200 * ms, 300 * ms}},
		{"fixed alone", backoff.Policy{Kind: backoff.Fixed}, []time.Duration{100 * ms, 100 * ms}},
		{"max alone", backoff.Policy{Max: 250 * ms}, []time.Duration{100 * ms, 200 * ms, 250 * ms}},
		{"base alone", backoff.Policy{Base: 20 * time.Second}, []time.Duration{20 * time.Second, 30 * time.Second}},
		{"base None", backoff.Policy{Base: backoff.None}, []time.Duration{0, 0, 0}},
		{"max None", backoff.Policy{Max: backoff.None}, []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 6400 * ms, 12800 * ms, 25600 * ms, 51200 * ms}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for i, want := range tt.raw {
				n := i + 1
				if got := tt.policy.Raw(n); got != want {
					t.Errorf("Raw(%d) = %v, want %v", n, got, want)
				}
				// With u just under 1, full jitter gives the raw delay, to the nanosecond.
				if p := tt.policy; p.Jitter == backoff.FullJitter {
					if got := p.Delay(n, 0, fixedSource(math.MaxUint64)); got < want-1 || got > want {
						t.Errorf("Delay(%d) at u≈1 = %v, want %v", n, got, want)
					}
				} else if got := p.Delay(n, 0, nil); got != want {
					t.Errorf("Delay(%d) = %v, want %v", n, got, want)
				}
			}
		})
	}
}

func TestEffective(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	tests := []struct {
		name      string
		policy    backoff.Policy
		effective backoff.Policy
	}{
		{"zero", backoff.Policy{}, backoff.Policy{Base: 100 * ms, Multiplier: 2, Increment: 100 * ms, Max: 30 * time.Second, JitterFactor: 0.1}},
		{"increment follows base", backoff.Policy{Kind: backoff.Linear, Base: time.Second}, backoff.Policy{Kind: backoff.Linear, Base: time.Second, Multiplier: 2, Increment: time.Second, Max: 30 * time.Second, JitterFactor: 0.1}},
		{"negatives are None", backoff.Policy{Base: -5, Increment: -time.Hour, Max: -1, Min: 3 * ms}, backoff.Policy{Base: backoff.None, Multiplier: 2, Increment: backoff.None, Min: 3 * ms, Max: backoff.None, JitterFactor: 0.1}},
		{"increment follows a None base", backoff.Policy{Base: backoff.None}, backoff.Policy{Base: backoff.None, Multiplier: 2, Increment: backoff.None, Max: 30 * time.Second, JitterFactor: 0.1}},
		{"set fields stay", backoff.Policy{Kind: backoff.Fixed, Base: ms, Multiplier: 1.5, Increment: 2 * ms, Min: ms, Max: 9 * ms, Jitter: backoff.ProportionalJitter, JitterFactor: 0.5}, backoff.Policy{Kind: backoff.Fixed, Base: ms, Multiplier: 1.5, Increment: 2 * ms, Min: ms, Max: 9 * ms, Jitter: backoff.ProportionalJitter, JitterFactor: 0.5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := tt.policy.Effective()
			if !reflect.DeepEqual(got, tt.effective) {
				t.Errorf("Effective() = %+v, want %+v", got, tt.effective)
			}
			if again := got.Effective(); !reflect.DeepEqual(again, got) {
				t.Errorf("Effective().Effective() = %+v, want %+v", again, got)
			}
			for n := 1; n <= 20; n++ {
				if a, b := tt.policy.Delay(n, 0, fixedSource(1<<62)), got.Delay(n, 0, fixedSource(1<<62)); a != b {
					t.Errorf("Delay(%d) = %v, but %v once resolved", n, a, b)
				}
			}
		})
	}
}

// TestDelayNeverOverflows drives every kind to absurd retry numbers and
// multipliers: the delay stays within [0, max], and with no jitter it never
// decreases as n grows.
func TestDelayNeverOverflows(t *testing.T) {
	t.Parallel()
	ns := []int{1, 2, 63, 64, 65, 1000, 10_000, 1_000_000, math.MaxInt32, math.MaxInt - 1, math.MaxInt}
	policies := map[string]backoff.Policy{
		"exponential huge multiplier":  {Base: time.Hour, Multiplier: 1e300, Max: backoff.None, Jitter: backoff.NoJitter},
		"exponential ×2 no cap":        {Base: time.Nanosecond, Max: backoff.None, Jitter: backoff.NoJitter},
		"exponential ×2 huge base":     {Base: math.MaxInt64, Max: backoff.None, Jitter: backoff.NoJitter},
		"exponential ×2 capped":        {Base: time.Second, Max: time.Minute, Jitter: backoff.NoJitter},
		"exponential ×2 default cap":   {Base: time.Second, Jitter: backoff.NoJitter},
		"exponential ×2 zero base":     {Base: backoff.None, Max: backoff.None, Jitter: backoff.NoJitter},
		"exponential ×1":               {Base: time.Second, Multiplier: 1, Max: backoff.None, Jitter: backoff.NoJitter},
		"linear huge increment":        {Kind: backoff.Linear, Base: time.Hour, Increment: math.MaxInt64, Max: backoff.None, Jitter: backoff.NoJitter},
		"proportional at the ceiling":  {Base: time.Hour, Max: backoff.None, Jitter: backoff.ProportionalJitter, JitterFactor: 1},
		"equal at the ceiling":         {Base: time.Hour, Max: backoff.None, Jitter: backoff.EqualJitter},
		"full at the ceiling":          {Base: time.Hour, Max: backoff.None},
		"decorrelated no cap":          {Base: time.Hour, Max: backoff.None, Jitter: backoff.DecorrelatedJitter},
		"decorrelated default cap":     {Base: time.Hour, Jitter: backoff.DecorrelatedJitter},
		"max doublings no cap":         {Base: time.Hour, MaxDoublings: 40, Max: backoff.None, Jitter: backoff.NoJitter},
		"max doublings ×1e300":         {Base: time.Hour, Multiplier: 1e300, MaxDoublings: 2, Max: backoff.None, Jitter: backoff.NoJitter},
		"max doublings huge base":      {Base: math.MaxInt64, MaxDoublings: 1, Max: backoff.None, Jitter: backoff.NoJitter},
		"max doublings capped":         {Base: time.Second, MaxDoublings: 3, Max: time.Hour, Jitter: backoff.NoJitter},
		"schedule no cap":              {Kind: backoff.Schedule, Delays: []time.Duration{time.Second, math.MaxInt64}, Max: backoff.None, Jitter: backoff.NoJitter},
		"schedule full at the ceiling": {Kind: backoff.Schedule, Delays: []time.Duration{math.MaxInt64}, Max: backoff.None},
		"custom negative":              {Kind: backoff.Custom, Func: func(n int) time.Duration { return -time.Duration(n) }},
	}
	for name, p := range policies {
		limit := p.Effective().Max
		if limit < 0 {
			limit = math.MaxInt64
		}
		for _, draw := range draws {
			var last, prev time.Duration
			for _, n := range ns {
				got := p.Delay(n, prev, draw.src)
				if got < 0 || got > limit {
					t.Errorf("%s/%s: Delay(%d) = %v, outside [0, %v]", name, draw.name, n, got, limit)
				}
				if p.Jitter == backoff.NoJitter && got < last {
					t.Errorf("%s: Delay(%d) = %v fell below the delay of a smaller n, %v", name, n, got, last)
				}
				last, prev = got, got
			}
		}
	}
}

func TestDelayAllocatesNothing(t *testing.T) {
	for _, j := range []backoff.Jitter{backoff.NoJitter, backoff.FullJitter, backoff.EqualJitter, backoff.ProportionalJitter, backoff.DecorrelatedJitter} {
		p := backoff.Policy{Base: 10 * time.Millisecond, Max: time.Second, Jitter: j}
		allocs := testing.AllocsPerRun(1000, func() { p.Delay(7, 40*time.Millisecond, nil) })
		if allocs != 0 {
			t.Errorf("%v: %v allocations per Delay, want 0", j, allocs)
		}
	}
}

func TestSequence(t *testing.T) {
	t.Parallel()
	p := backoff.Policy{Base: 10 * time.Millisecond, Max: 45 * time.Millisecond, Jitter: backoff.NoJitter}
	s := backoff.NewSequence(p, nil)
	var got []time.Duration
	for range 4 {
		got = append(got, s.Next())
	}
	want := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond, 45 * time.Millisecond}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Next ×4 = %v, want %v", got, want)
	}
	if s.Retries() != 4 {
		t.Errorf("Retries() = %d, want 4", s.Retries())
	}
	s.Reset()
	if got := s.Next(); got != 10*time.Millisecond {
		t.Errorf("after Reset, Next() = %v, want 10ms", got)
	}
}

// TestSequenceDecorrelatedCarriesPrev checks that decorrelated jitter grows
// from the previous delay of the same sequence: with u≈1 every delay is three
// times the last, until the cap.
func TestSequenceDecorrelatedCarriesPrev(t *testing.T) {
	t.Parallel()
	p := backoff.Policy{Base: 10 * time.Millisecond, Max: time.Second, Jitter: backoff.DecorrelatedJitter}
	s := backoff.NewSequence(p, fixedSource(math.MaxUint64))
	want := []time.Duration{30, 90, 270, 810, 1000}
	for i, w := range want {
		got := s.Next()
		if d := got - w*time.Millisecond; d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("delay %d = %v, want ≈%v", i+1, got, w*time.Millisecond)
		}
	}
}

// TestCommonPathAgrees: exponential doubling with full jitter has a path of
// its own in Delay. A Multiplier of −0 means the default just as 0 does but
// takes the general path, so the two must agree to the nanosecond.
func TestCommonPathAgrees(t *testing.T) {
	t.Parallel()
	negZero := math.Copysign(0, -1)
	bases := []time.Duration{0, backoff.None, 1, 3 * time.Millisecond, time.Hour, math.MaxInt64}
	maxes := []time.Duration{0, backoff.None, 1, time.Second, math.MaxInt64}
	mins := []time.Duration{0, 1, 500 * time.Millisecond, 40 * time.Second}
	ns := []int{-1, 0, 1, 2, 3, 10, 40, 62, 63, 64, 65, 1000, 10_000, math.MaxInt}
	for _, base := range bases {
		for _, maxD := range maxes {
			for _, minD := range mins {
				for _, m := range []float64{0, 2} {
					fast := backoff.Policy{Base: base, Multiplier: m, Min: minD, Max: maxD}
					general := fast
					general.Multiplier = negZero
					a, b := rand.NewPCG(uint64(base), uint64(maxD)), rand.NewPCG(uint64(base), uint64(maxD))
					for _, n := range ns {
						if x, y := fast.Delay(n, 0, a), general.Delay(n, 0, b); x != y {
							t.Errorf("%+v: Delay(%d) = %v on the common path, %v on the general one", fast, n, x, y)
						}
					}
				}
			}
		}
	}
}
