package hostlimit_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/service/hostlimit"
	"math/rand/v2"
)

func TestKey(t *testing.T) {
	// Not parallel: AllocsPerRun refuses to run beside other tests.
	for in, want := range map[string]string{
		"http://127.0.0.1:8080/hook?x=1":   "http://127.0.0.1:8080",
		"https://Example.COM/p":            "https://example.com",
		"http://user:pw@host.example:81/a": "http://host.example:81",
		"http://host.example?q=http://x/":  "http://host.example",
		"http://host.example#frag":         "http://host.example",
		"HTTPS://[::1]:9000":               "https://[::1]:9000",
		"not a url":                        "",
		"://nohost":                        "",
	} {
		if got := hostlimit.Key(in); got != want {
			t.Errorf("Key(%q) = %q, want %q", in, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { hostlimit.Key("http://127.0.0.1:8080/hook") }); n != 0 {
		t.Errorf("Key allocates %v times, want 0", n)
	}
}

func TestHeldError(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                             hostlimit.HeldMessage,
		hostlimit.HeldMessage:          hostlimit.HeldMessage,
		"HTTP 503 Service Unavailable": "HTTP 503 Service Unavailable (held: target overloaded)",
		"HTTP 503 Service Unavailable (held: target overloaded)": "HTTP 503 Service Unavailable (held: target overloaded)",
	} {
		if got := hostlimit.HeldError(in); got != want {
			t.Errorf("HeldError(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSettingRoundTrip(t *testing.T) {
	t.Parallel()
	p := retry.Policy{MaxAttempts: 4}
	plain, _ := json.Marshal(p)
	for _, tt := range []struct {
		name, in string
		off      bool
		ceiling  float64
	}{
		{"default", `{}`, false, 0},
		{"enabled", `{"enabled": true}`, false, 0},
		{"off", `{"enabled": false}`, true, 0},
		{"own", `{"floor": 5, "ceiling": 500}`, false, 500},
	} {
		s, err := hostlimit.ParseSetting([]byte(tt.in))
		if err != nil {
			t.Fatalf("%s: ParseSetting = %v", tt.name, err)
		}
		spec, err := hostlimit.Encode(&p, s)
		if err != nil {
			t.Fatalf("%s: Encode = %v", tt.name, err)
		}
		if s.IsDefault() != (string(spec) == string(plain)) {
			t.Errorf("%s: spec %s; a default setting must encode as the plain policy %s", tt.name, spec, plain)
		}
		got, again, err := hostlimit.Decode(spec)
		if err != nil || got.Attempts() != 4 || again.Off != tt.off || (again.Config != nil) != (tt.ceiling > 0) ||
			(again.Config != nil && again.Config.Ceiling != tt.ceiling) {
			t.Errorf("%s: Decode(%s) = %+v, %+v, %v", tt.name, spec, got, again, err)
		}
		if re, _ := hostlimit.Encode(got, again); string(re) != string(spec) {
			t.Errorf("%s: re-encoded %s, want %s", tt.name, re, spec)
		}
	}
	for _, bad := range []string{`[]`, `{"enabled": 1}`, `{"enabled": false, "floor": 3}`, `{"decrease": 2}`, `{"nope": 1}`} {
		_, err := hostlimit.ParseSetting([]byte(bad))
		var fe *retry.FieldError
		if !errors.As(err, &fe) {
			t.Errorf("ParseSetting(%s) = %v, want a field error", bad, err)
		}
	}
}

func TestLimitsShareByHostAndSetting(t *testing.T) {
	t.Parallel()
	ls, err := hostlimit.New(retry.LimiterConfig{}, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	own, _ := hostlimit.ParseSetting([]byte(`{"ceiling": 10}`))
	off, _ := hostlimit.ParseSetting([]byte(`{"enabled": false}`))
	a, b := ls.Get("http://a", hostlimit.Setting{}), ls.Get("http://a", hostlimit.Setting{})
	if a == nil || a != b {
		t.Error("two gets of one host and setting gave different hosts")
	}
	if c := ls.Get("http://a", own); c == a || c.Rate() != 10 {
		t.Errorf("a policy's own setting shares the default limiter, or rate %v != its ceiling 10", c.Rate())
	}
	if ls.Get("http://a", off) != nil || ls.Get("", hostlimit.Setting{}) != nil {
		t.Error("a Host for a setting turned off, or for no host")
	}
	ls.Get("http://c", hostlimit.Setting{}) // over the max of 2: one is forgotten
}

// With the limiters opt-in (retryd's --host-limiter off), only the
// policies that turn one on have their tasks pass it.
func TestOptIn(t *testing.T) {
	t.Parallel()
	ls, err := hostlimit.New(retry.LimiterConfig{}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	ls.SetOptIn(true)
	on, _ := hostlimit.ParseSetting([]byte(`{"enabled": true}`))
	own, _ := hostlimit.ParseSetting([]byte(`{"ceiling": 10}`))
	if ls.Get("http://a", hostlimit.Setting{}) != nil {
		t.Error("opt-in: a policy that says nothing got a limiter")
	}
	if ls.Get("http://a", on) == nil || ls.Get("http://a", own) == nil {
		t.Error(`opt-in: a policy with {"enabled": true} or settings of its own got no limiter`)
	}
	ls.SetOptIn(false)
	if ls.Get("http://a", hostlimit.Setting{}) == nil {
		t.Error("on for all: a policy that says nothing got no limiter")
	}
}

// Held tasks queue at the rate the limiter is expected to have room for,
// Overbook times over, and beyond MaxSpread are spread at random.
func TestAdmitQueuesHeld(t *testing.T) {
	t.Parallel()
	ls, err := hostlimit.New(retry.LimiterConfig{Floor: 1, Ceiling: 1}, 0, rand.NewPCG(1, 2))
	if err != nil {
		t.Fatal(err)
	}
	h := ls.Get("http://a", hostlimit.Setting{})
	now := time.Unix(1000, 0)
	if _, _, err := h.Admit(now); err != nil {
		t.Fatalf("first Admit = %v", err)
	}
	var dues []time.Time
	for i := range 1000 {
		at := now.Add(time.Duration(i) * 500 * time.Microsecond) // within the first 0.5 s: no slot
		_, until, err := h.Admit(at)
		if !errors.Is(err, retry.ErrLimited) {
			t.Fatalf("Admit %d = %v, want ErrLimited", i, err)
		}
		if until.Before(now.Add(time.Second)) {
			t.Fatalf("held task %d due at %v, before the limiter's next slot", i, until.Sub(now))
		}
		dues = append(dues, until)
	}
	overbook := hostlimit.Overbook
	slot := time.Duration(float64(time.Second) / overbook) // at 1/s
	for i := 1; i < 10; i++ {
		if d := dues[i].Sub(dues[i-1]); d != slot {
			t.Errorf("held tasks %d and %d are %v apart, want %v", i-1, i, d, slot)
		}
	}
	last := dues[0]
	for _, d := range dues {
		if d.After(last) {
			last = d
		}
	}
	if spread := last.Sub(dues[0]); spread < hostlimit.MaxSpread/2 || spread > hostlimit.MaxSpread+time.Second {
		t.Errorf("1000 held tasks spread over %v, want about MaxSpread (%v)", spread, hostlimit.MaxSpread)
	}
}

// SetShare divides every limiter's increase, of the hosts there are and of
// those made later.
func TestSetShare(t *testing.T) {
	t.Parallel()
	ls, err := hostlimit.New(retry.LimiterConfig{Floor: 10, Ceiling: 1000, Increase: 40, CircuitAfter: -1}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	step := func(h *hostlimit.Host) float64 {
		h.Report(now, &statusError{429}) // to the floor
		before := h.Rate()
		h.Report(now, nil)
		return (h.Rate() - before) * before
	}
	a := ls.Get("http://a", hostlimit.Setting{})
	ls.SetShare(4)
	b := ls.Get("http://b", hostlimit.Setting{})
	for name, h := range map[string]*hostlimit.Host{"a": a, "b": b} {
		if got := step(h); got < 9.99 || got > 10.01 {
			t.Errorf("host %s: a success adds %v/rate with 4 sharing, want 40/4 = 10", name, got)
		}
	}
	ls.SetShare(0)
	if got := step(a); got < 39.99 || got > 40.01 {
		t.Errorf("alone again: a success adds %v/rate, want 40", got)
	}
}

// statusError is an answer of an HTTP status, as retry.IsOverload reads one.
type statusError struct{ status int }

func (e *statusError) Error() string       { return "status" }
func (e *statusError) HTTPStatusCode() int { return e.status }
