package retryhttp_test

import (
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
)

func host(t *testing.T, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// TestLimitersSlowDownTheHostThatSaysSo: a host answering 429 and 503 has
// its limiter's rate cut; another host, answering 200, keeps its own.
func TestLimitersSlowDownTheHostThatSaysSo(t *testing.T) {
	t.Parallel()
	busy := newServer(t, reply{status: 429}, reply{status: 503}, reply{status: 200})
	fine := newServer(t, reply{status: 200})
	ls, err := retry.NewLimiters(retry.LimiterConfig{Floor: 5, Ceiling: 100, CircuitAfter: -1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	clock := newClock()
	client := &http.Client{Transport: &retryhttp.Transport{Base: newBase(t), Policy: fixedPolicy(clock, 4), Limiters: ls}}
	for _, s := range []*server{busy, fine} {
		resp, err := client.Get(s.URL)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			t.Errorf("%s: status %d, want 200", s.URL, resp.StatusCode)
		}
		readBody(t, resp)
	}
	if got := len(busy.received()); got != 3 {
		t.Errorf("the busy host got %d requests, want 3", got)
	}
	if got := ls.Len(); got != 2 {
		t.Errorf("%d limiters, want one per host", got)
	}
	if r := ls.Get(host(t, busy.URL)).Rate(); r >= 100 {
		t.Errorf("the busy host's rate is %v/s, want it cut below the ceiling", r)
	}
	if r := ls.Get(host(t, fine.URL)).Rate(); r != 100 {
		t.Errorf("the other host's rate is %v/s, want the ceiling, untouched", r)
	}
}

// TestLimitersCircuitOpens: a host that answers nothing but 503 opens its
// circuit; the request stops there, and the next one before any call, with
// ErrCircuitOpen (the probe would come after the budget).
func TestLimitersCircuitOpens(t *testing.T) {
	t.Parallel()
	s := newServer(t, reply{status: 503})
	ls, err := retry.NewLimiters(retry.LimiterConfig{Ceiling: 100, CircuitAfter: 15 * time.Millisecond, OpenFor: 2 * time.Hour}, 0)
	if err != nil {
		t.Fatal(err)
	}
	clock := newClock()
	client := &http.Client{Transport: &retryhttp.Transport{Base: newBase(t), Policy: fixedPolicy(clock, 10), Limiters: ls}}
	_, err = client.Get(s.URL)
	var se *retryhttp.StatusError
	if !errors.Is(err, retry.ErrCircuitOpen) || !errors.As(err, &se) || se.StatusCode != 503 {
		t.Errorf("Get = %v; want ErrCircuitOpen, wrapping the last 503", err)
	}
	n := len(s.received())
	if st := ls.Get(host(t, s.URL)).State(); st != retry.CircuitOpen || n != 3 {
		t.Fatalf("circuit %v after %d requests, want open after 3", st, n)
	}
	_, err = client.Get(s.URL)
	if !errors.Is(err, retry.ErrCircuitOpen) || len(s.received()) != n {
		t.Errorf("next request: %v after %d more requests; want ErrCircuitOpen, none sent", err, len(s.received())-n)
	}
}
