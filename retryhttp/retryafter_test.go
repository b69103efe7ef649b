package retryhttp_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry/retryhttp"
)

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := epoch
	tests := []struct {
		name   string
		value  string
		want   time.Duration
		wantOK bool
	}{
		{name: "seconds", value: "120", want: 2 * time.Minute, wantOK: true},
		{name: "zero", value: "0", want: 0, wantOK: true},
		{name: "spaces", value: " 5 ", want: 5 * time.Second, wantOK: true},
		{name: "IMF-fixdate", value: now.Add(90 * time.Second).Format(http.TimeFormat), want: 90 * time.Second, wantOK: true},
		{name: "RFC 850 date", value: now.Add(time.Hour).Format(time.RFC850), want: time.Hour, wantOK: true},
		{name: "asctime date", value: now.Add(3 * time.Second).Format(time.ANSIC), want: 3 * time.Second, wantOK: true},
		{name: "date in the past", value: now.Add(-time.Hour).Format(http.TimeFormat), want: 0, wantOK: true},
		{name: "huge seconds saturate", value: "99999999999999999999999", want: time.Duration(1<<63 - 1), wantOK: true},
		{name: "empty", value: ""},
		{name: "negative", value: "-5"},
		{name: "plus sign", value: "+5"},
		{name: "fraction", value: "1.5"},
		{name: "unit", value: "5s"},
		{name: "words", value: "soon"},
		{name: "bad date", value: "Wed, 32 Oct 2015 07:28:00 GMT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := retryhttp.ParseRetryAfter(tt.value, now)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.value, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, seed := range []string{"0", "120", "-1", "", " 7 ", "1e3", "99999999999999999999",
		"Sun, 01 Mar 2026 12:00:30 GMT", "Sunday, 01-Mar-26 12:00:30 GMT", "Sun Mar  1 12:00:30 2026", "garbage"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		d, ok := retryhttp.ParseRetryAfter(value, epoch)
		if d < 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, negative", value, d)
		}
		if !ok && d != 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, false; want 0 when not ok", value, d)
		}
		if at, err := http.ParseTime(strings.TrimSpace(value)); err == nil {
			if want := max(at.Sub(epoch), 0); d != want || !ok {
				t.Fatalf("ParseRetryAfter(%q) = %v, %v; want %v, true", value, d, ok, want)
			}
		}
		if n, err := strconv.ParseUint(strings.TrimSpace(value), 10, 32); err == nil && !strings.HasPrefix(strings.TrimSpace(value), "+") {
			if want := time.Duration(n) * time.Second; d != want || !ok {
				t.Fatalf("ParseRetryAfter(%q) = %v, %v; want %v, true", value, d, ok, want)
			}
		}
	})
}

func TestRetryAfterSetsTheWait(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		retryAfter string
		want       time.Duration
	}{
		{name: "seconds", retryAfter: "7", want: 7 * time.Second},
		{name: "HTTP-date", retryAfter: epoch.Add(9 * time.Second).Format(http.TimeFormat), want: 9 * time.Second},
		{name: "shorter than the backoff", retryAfter: "0", want: 10 * time.Millisecond},
		// A floor, beyond the backoff's Max (1 minute here): an earlier retry
		// would spend an attempt on a server that asked to wait.
		{name: "beyond the backoff's Max", retryAfter: "600", want: 10 * time.Minute},
		{name: "malformed ignored", retryAfter: "soon", want: 10 * time.Millisecond},
		{name: "negative ignored", retryAfter: "-3", want: 10 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, reply{status: 503, retryAfter: tt.retryAfter}, reply{status: 200, body: "ok"})
			clock := newClock()
			client := &http.Client{Transport: &retryhttp.Transport{Base: newBase(t), Policy: fixedPolicy(clock, 4)}}

			resp, err := client.Get(srv.URL)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if got, want := readBody(t, resp), "ok"; got != want {
				t.Errorf("body = %q, want %q", got, want)
			}
			if got, want := clock.Sleeps(), []time.Duration{tt.want}; !slices.Equal(got, want) {
				t.Errorf("sleeps = %v, want %v", got, want)
			}
		})
	}
}

func TestRetryAfterPastBudget(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		max        time.Duration
		retryAfter string
		wantLog    string
	}{
		// The engine compares the hint as the server gave it with the budget,
		// before capping the wait at Max.
		{name: "hint under Max", max: 5 * time.Minute, retryAfter: "120", wantLog: "time budget exhausted"},
		{name: "hint over Max", max: 5 * time.Second, retryAfter: "120", wantLog: "time budget exhausted"},
		{name: "HTTP-date over Max", max: 5 * time.Second, retryAfter: epoch.Add(time.Hour).Format(http.TimeFormat), wantLog: "time budget exhausted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, reply{status: 429, retryAfter: tt.retryAfter, body: "slow down"}, reply{status: 200})
			clock := newClock()
			var logs bytes.Buffer
			policy := fixedPolicy(clock, 4)
			policy.Budget = time.Minute
			policy.Backoff.Max = tt.max
			policy.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			client := &http.Client{Transport: &retryhttp.Transport{Base: newBase(t), Policy: policy}}

			resp, err := client.Get(srv.URL)
			if err != nil {
				t.Fatalf("Get: %v, want the 429 response", err)
			}
			if got, want := resp.StatusCode, 429; got != want {
				t.Errorf("status = %d, want %d", got, want)
			}
			if got, want := resp.Header.Get("Retry-After"), tt.retryAfter; got != want {
				t.Errorf("Retry-After = %q, want %q", got, want)
			}
			if got, want := readBody(t, resp), "slow down"; got != want {
				t.Errorf("body = %q, want %q", got, want)
			}
			if got, want := len(srv.received()), 1; got != want {
				t.Errorf("server saw %d requests, want %d", got, want)
			}
			if got := clock.Sleeps(); len(got) != 0 {
				t.Errorf("slept %v, want none", got)
			}
			if !strings.Contains(logs.String(), tt.wantLog) {
				t.Errorf("log %q does not say %q", logs.String(), tt.wantLog)
			}
		})
	}
}
