package retryhttp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/retryhttp"
)

// flaky returns a server that answers 503 to its first n requests.
func flaky(n int32) *httptest.Server {
	var calls atomic.Int32
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= n {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, "%s done after %d attempts", r.Method, calls.Load())
	}))
}

func ExampleNewClient() {
	srv := flaky(2)
	defer srv.Close()

	client := retryhttp.NewClient(retry.Policy{MaxAttempts: 5, Budget: 10 * time.Second})
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body))
	// Output: 200 GET done after 3 attempts
}

// A POST is retried when it carries an Idempotency-Key; AddIdempotencyKey
// gives it one, the same on every attempt.
func ExampleTransport() {
	srv := flaky(1)
	defer srv.Close()

	client := &http.Client{Transport: &retryhttp.Transport{
		Policy: retry.Policy{
			MaxAttempts: 3,
			Backoff:     backoff.Policy{Kind: backoff.Fixed, Base: 5 * time.Millisecond, Jitter: backoff.NoJitter},
			Observer: retry.OnRetry(func(_ context.Context, a retry.Event) {
				var se *retryhttp.StatusError
				if errors.As(a.Err, &se) {
					fmt.Printf("%s attempt %d: %d; retrying in %v\n", se.Method, a.Attempt, se.StatusCode, a.Delay)
				}
			}),
		},
		AddIdempotencyKey: true,
		AttemptTimeout:    5 * time.Second,
	}}
	resp, err := client.Post(srv.URL, "application/json", strings.NewReader(`{"amount":100}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body))
	// Output:
	// POST attempt 1: 503; retrying in 5ms
	// 200 POST done after 2 attempts
}

func ExampleParseRetryAfter() {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, v := range []string{"120", "Sun, 01 Mar 2026 12:00:30 GMT", "-1", "soon"} {
		d, ok := retryhttp.ParseRetryAfter(v, now)
		fmt.Printf("%q: %v %v\n", v, d, ok)
	}
	// Output:
	// "120": 2m0s true
	// "Sun, 01 Mar 2026 12:00:30 GMT": 30s true
	// "-1": 0s false
	// "soon": 0s false
}
