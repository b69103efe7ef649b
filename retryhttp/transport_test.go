package retryhttp_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryhttp"
)

func TestFlakyServerSucceeds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		method    string
		body      string
		key       string // the caller's Idempotency-Key
		addKey    bool
		methods   []string
		wantKey   bool // every attempt carries one key
		wantFixed string
	}{
		{name: "GET", method: http.MethodGet},
		{name: "PUT with body", method: http.MethodPut, body: `{"qty":3}`},
		{name: "POST with the caller's key", method: http.MethodPost, body: "order", key: "key-1", wantKey: true, wantFixed: "key-1"},
		{name: "POST with an added key", method: http.MethodPost, body: "order", addKey: true, wantKey: true},
		{name: "PATCH with an added key", method: http.MethodPatch, body: "patch", addKey: true, wantKey: true},
		{name: "POST opted in", method: http.MethodPost, body: "order", methods: []string{http.MethodPost}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, reply{status: 503}, reply{status: 502}, reply{status: 200, body: "ok"})
			clock := newClock()
			client := &http.Client{Transport: &retryhttp.Transport{
				Base: newBase(t), Policy: fixedPolicy(clock, 4), AddIdempotencyKey: tt.addKey, Methods: tt.methods,
			}}
			req, err := http.NewRequest(tt.method, srv.URL+"/orders", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if tt.key != "" {
				req.Header.Set("Idempotency-Key", tt.key)
			}

			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("Do: %v", err)
			}
			if got, want := resp.StatusCode, 200; got != want {
				t.Errorf("status = %d, want %d", got, want)
			}
			if got, want := readBody(t, resp), "ok"; got != want {
				t.Errorf("body = %q, want %q", got, want)
			}
			reqs := srv.received()
			if got, want := len(reqs), 3; got != want {
				t.Fatalf("server saw %d requests, want %d", got, want)
			}
			for i, r := range reqs {
				if got, want := r.body, tt.body; got != want {
					t.Errorf("attempt %d body = %q, want %q", i+1, got, want)
				}
				if got, want := r.key, reqs[0].key; got != want {
					t.Errorf("attempt %d Idempotency-Key = %q, want %q as on attempt 1", i+1, got, want)
				}
			}
			if got := reqs[0].key != ""; got != tt.wantKey {
				t.Errorf("attempts carry a key: %v, want %v", got, tt.wantKey)
			}
			if tt.wantFixed != "" && reqs[0].key != tt.wantFixed {
				t.Errorf("Idempotency-Key = %q, want the caller's %q", reqs[0].key, tt.wantFixed)
			}
			if tt.addKey {
				if !uuidV4.MatchString(reqs[0].key) {
					t.Errorf("added Idempotency-Key %q is not a version 4 UUID", reqs[0].key)
				}
				if got := req.Header.Get("Idempotency-Key"); got != "" {
					t.Errorf("the caller's request was modified: it has Idempotency-Key %q", got)
				}
			}
			if got, want := clock.Sleeps(), []time.Duration{10 * time.Millisecond, 10 * time.Millisecond}; !slices.Equal(got, want) {
				t.Errorf("sleeps = %v, want %v", got, want)
			}
		})
	}
}

func TestFinalStatusesNotRetried(t *testing.T) {
	t.Parallel()
	for _, status := range []int{400, 401, 403, 404, 409, 422, 501} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, reply{status: status, body: "no"}, reply{status: 200})
			client := &http.Client{Transport: &retryhttp.Transport{Base: newBase(t), Policy: fixedPolicy(newClock(), 4)}}

			resp, err := client.Get(srv.URL)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if got, want := resp.StatusCode, status; got != want {
				t.Errorf("status = %d, want %d", got, want)
			}
			if got, want := readBody(t, resp), "no"; got != want {
				t.Errorf("body = %q, want %q", got, want)
			}
			if got, want := len(srv.received()), 1; got != want {
				t.Errorf("server saw %d requests, want %d", got, want)
			}
		})
	}
}

// onceReader hides its type so that http.NewRequest cannot set GetBody.
type onceReader struct{ io.Reader }

func TestRequestsSentOnce(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		method  string
		body    io.Reader
		methods []string
	}{
		{name: "POST without key", method: http.MethodPost, body: strings.NewReader("x")},
		{name: "PATCH without key", method: http.MethodPatch, body: strings.NewReader("x")},
		{name: "PUT with a body that cannot be rewound", method: http.MethodPut, body: onceReader{strings.NewReader("x")}},
		{name: "GET not among Methods", method: http.MethodGet, methods: []string{http.MethodPut}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, reply{status: 503, body: "busy"}, reply{status: 200})
			clock := newClock()
			client := &http.Client{Transport: &retryhttp.Transport{Base: newBase(t), Policy: fixedPolicy(clock, 4), Methods: tt.methods}}
			req, err := http.NewRequest(tt.method, srv.URL, tt.body)
			if err != nil {
				t.Fatal(err)
			}

			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("Do: %v", err)
			}
			if got, want := resp.StatusCode, 503; got != want {
				t.Errorf("status = %d, want %d", got, want)
			}
			if got, want := readBody(t, resp), "busy"; got != want {
				t.Errorf("body = %q, want %q", got, want)
			}
			if got, want := len(srv.received()), 1; got != want {
				t.Errorf("server saw %d requests, want %d", got, want)
			}
			if got := clock.Sleeps(); len(got) != 0 {
				t.Errorf("slept %v, want no sleep", got)
			}
		})
	}
}

func TestAttemptsExhaustedReturnsLastResponse(t *testing.T) {
	t.Parallel()
	srv := newServer(t, reply{status: 503})
	var hooked []int
	policy := fixedPolicy(newClock(), 4)
	policy.Observer = retry.OnRetry(func(_ context.Context, a retry.Event) {
		var se *retryhttp.StatusError
		if !errors.As(a.Err, &se) {
			t.Errorf("OnRetry error %v is not a *StatusError", a.Err)
			return
		}
		hooked = append(hooked, se.StatusCode)
	})
	client := &http.Client{Transport: &retryhttp.Transport{Base: newBase(t), Policy: policy}}

	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatalf("Get: %v, want the last response and no error", err)
	}
	if got, want := resp.StatusCode, 503; got != want {
		t.Errorf("status = %d, want %d", got, want)
	}
	if got, want := readBody(t, resp), "attempt 4"; got != want {
		t.Errorf("body = %q, want the last attempt's %q", got, want)
	}
	if got, want := hooked, []int{503, 503, 503}; !slices.Equal(got, want) {
		t.Errorf("OnRetry saw statuses %v, want %v", got, want)
	}
}

func TestBodyRewindFails(t *testing.T) {
	t.Parallel()
	srv := newServer(t, reply{status: 503}, reply{status: 200})
	client := &http.Client{Transport: &retryhttp.Transport{Base: newBase(t), Policy: fixedPolicy(newClock(), 4)}}
	req, err := http.NewRequest(http.MethodPut, srv.URL, bytes.NewReader([]byte("x")))
	if err != nil {
		t.Fatal(err)
	}
	rewind := errors.New("body gone")
	req.GetBody = func() (io.ReadCloser, error) { return nil, rewind }

	_, err = client.Do(req)
	if !errors.Is(err, rewind) || !errors.Is(err, retry.ErrNotRetryable) {
		t.Errorf("Do error = %v, want one wrapping %v and %v", err, rewind, retry.ErrNotRetryable)
	}
	if got, want := len(srv.received()), 1; got != want {
		t.Errorf("server saw %d requests, want %d", got, want)
	}
}

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
