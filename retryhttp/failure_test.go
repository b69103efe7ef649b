package retryhttp_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/retryhttp"
)

func TestConnectionRefused(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/"
	ln.Close()
	var hooked []string
	policy := fixedPolicy(newClock(), 3)
	policy.Observer = retry.OnRetry(func(_ context.Context, a retry.Event) {
		var te *retryhttp.TransportError
		if !errors.As(a.Err, &te) {
			t.Errorf("OnRetry error %v is not a *TransportError", a.Err)
			return
		}
		hooked = append(hooked, te.Method+" "+te.URL)
	})
	client := &http.Client{Transport: &retryhttp.Transport{Base: newBase(t), Policy: policy}}

	_, err = client.Get(url)
	if !errors.Is(err, syscall.ECONNREFUSED) || !errors.Is(err, retry.ErrAttemptsExhausted) {
		t.Errorf("Get error = %v, want one wrapping ECONNREFUSED and %v", err, retry.ErrAttemptsExhausted)
	}
	var re *retry.Error
	if !errors.As(err, &re) || re.Attempts != 3 {
		t.Errorf("Get error = %#v, want a *retry.Error after 3 attempts", err)
	}
	if got, want := len(hooked), 2; got != want || hooked[0] != "GET "+url {
		t.Errorf("OnRetry saw %q, want %d × %q", hooked, want, "GET "+url)
	}
}

func TestErrorNotTransientNotRetried(t *testing.T) {
	t.Parallel()
	client := &http.Client{Transport: &retryhttp.Transport{Base: newBase(t), Policy: fixedPolicy(newClock(), 3)}}

	_, err := client.Get("ftp://127.0.0.1/file")
	var re *retry.Error
	if !errors.As(err, &re) || re.Reason != retry.ErrNotRetryable || re.Attempts != 1 {
		t.Errorf("Get error = %v, want a *retry.Error, not retryable, after 1 attempt", err)
	}
}

func TestAttemptTimeout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		replies    []reply
		wantStatus int // 0: want an error
		wantSeen   int
	}{
		{name: "hangs every time", replies: []reply{{hang: true}}, wantSeen: 2},
		{name: "hangs once", replies: []reply{{hang: true}, {status: 200}}, wantStatus: 200, wantSeen: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, tt.replies...)
			client := &http.Client{Transport: &retryhttp.Transport{
				Base: newBase(t), Policy: fixedPolicy(newClock(), 2), AttemptTimeout: 250 * time.Millisecond,
			}}

			resp, err := client.Get(srv.URL)
			if tt.wantStatus == 0 {
				if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, retry.ErrAttemptsExhausted) {
					t.Errorf("Get error = %v, want one wrapping %v and %v", err, context.DeadlineExceeded, retry.ErrAttemptsExhausted)
				}
			} else {
				if err != nil {
					t.Fatalf("Get: %v", err)
				}
				if got, want := readBody(t, resp), "attempt 2"; got != want {
					t.Errorf("body = %q, want %q", got, want)
				}
			}
			if got, want := len(srv.received()), tt.wantSeen; got != want {
				t.Errorf("server saw %d requests, want %d", got, want)
			}
		})
	}
}

// A body that arrives long after the headers is still readable: the attempt
// timeout bounds the wait for the headers only.
func TestAttemptTimeoutLeavesBodyReadable(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := newSlowBodyServer(t, release)
	timeout := time.Second
	client := &http.Client{Transport: &retryhttp.Transport{Base: newBase(t), Policy: fixedPolicy(newClock(), 1), AttemptTimeout: timeout}}

	resp, err := client.Get(srv)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	time.Sleep(timeout + 500*time.Millisecond)
	close(release)
	if got, want := readBody(t, resp), "head+tail"; got != want {
		t.Errorf("body = %q, want %q", got, want)
	}
}

func TestCancelledDuringWait(t *testing.T) {
	t.Parallel()
	srv := newServer(t, reply{status: 503})
	ctx, cancel := context.WithCancel(t.Context())
	waiting := make(chan struct{}, 1)
	policy := retry.Policy{
		MaxAttempts: 3,
		Budget:      10 * time.Hour,
		Backoff:     backoff.Policy{Kind: backoff.Fixed, Base: time.Hour, Max: time.Hour, Jitter: backoff.NoJitter},
		Observer:    retry.OnRetry(func(context.Context, retry.Event) { waiting <- struct{}{} }),
	}
	client := &http.Client{Transport: &retryhttp.Transport{Base: newBase(t), Policy: policy}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()

	<-waiting
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) || !errors.Is(err, retry.ErrCancelled) {
			t.Errorf("Do error = %v, want one wrapping %v and %v", err, context.Canceled, retry.ErrCancelled)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Do still waiting 30s after its context was cancelled (the wait was an hour)")
	}
	if got, want := len(srv.received()), 1; got != want {
		t.Errorf("server saw %d requests, want %d", got, want)
	}
}

func TestCancelledDuringAttempt(t *testing.T) {
	t.Parallel()
	srv := newServer(t, reply{hang: true})
	ctx, cancel := context.WithCancel(t.Context())
	client := &http.Client{Transport: &retryhttp.Transport{Base: newBase(t), Policy: fixedPolicy(newClock(), 3)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := client.Do(req)
		errc <- err
	}()

	<-srv.arrived
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) || !errors.Is(err, retry.ErrCancelled) {
		t.Errorf("Do error = %v, want one wrapping %v and %v", err, context.Canceled, retry.ErrCancelled)
	}
	if got, want := len(srv.received()), 1; got != want {
		t.Errorf("server saw %d requests, want %d", got, want)
	}
}

func TestConnectionDroppedRetried(t *testing.T) {
	t.Parallel()
	srv := newServer(t, reply{drop: true}, reply{status: 200, body: "ok"})
	client := &http.Client{Transport: &retryhttp.Transport{Base: newBase(t), Policy: fixedPolicy(newClock(), 3)}}

	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got, want := readBody(t, resp), "ok"; got != want {
		t.Errorf("body = %q, want %q", got, want)
	}
	if got, want := len(srv.received()), 2; got != want {
		t.Errorf("server saw %d requests, want %d", got, want)
	}
}
