package dispatch_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/service/dispatch"
)

// loopback allows the httptest servers on 127.0.0.1 and nothing private else.
var loopback = dispatch.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}

func setup(t *testing.T, cfg dispatch.Config, h http.HandlerFunc) (*dispatch.Dispatcher, string) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	d := dispatch.New(cfg)
	t.Cleanup(d.Close)
	return d, srv.URL
}

func TestSendCarriesTheRequest(t *testing.T) {
	t.Parallel()
	type seen struct{ method, path, key, custom, host, body string }
	got := make(chan seen, 1)
	d, url := setup(t, dispatch.Config{Guard: loopback}, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.URL.Path, r.Header.Get("Idempotency-Key"), r.Header.Get("X-Custom"), r.Host, string(b)}
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "made it")
	})
	res := d.Send(context.Background(), dispatch.Request{
		Method:         "PUT",
		URL:            url + "/orders/7",
		Headers:        map[string]string{"X-Custom": "yes", "Idempotency-Key": "stale", "Host": "orders.example"},
		Body:           []byte(`{"n":7}`),
		IdempotencyKey: "key-1",
	})
	if res.Err != nil || res.Status != http.StatusCreated {
		t.Fatalf("Send = status %d, err %v; want 201", res.Status, res.Err)
	}
	want := seen{"PUT", "/orders/7", "key-1", "yes", "orders.example", `{"n":7}`}
	if g := <-got; g != want {
		t.Fatalf("target saw %+v, want %+v", g, want)
	}
	if res.Body != "made it" {
		t.Fatalf("Body = %q, want %q", res.Body, "made it")
	}
	if o := res.Outcome(&retry.Policy{}); o != dispatch.Success {
		t.Fatalf("Outcome = %v, want success", o)
	}
	if res.Duration <= 0 || res.Start.IsZero() {
		t.Fatalf("Start %v, Duration %v: want both set", res.Start, res.Duration)
	}
}

func TestSendOutcomes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		status  int
		policy  retry.Policy
		want    dispatch.Outcome
		wantMsg string
	}{
		{"503 retried by default", 503, retry.Policy{}, dispatch.Retry, "HTTP 503 Service Unavailable"},
		{"400 fails", 400, retry.Policy{}, dispatch.Fail, "HTTP 400 Bad Request"},
		{"404 fails", 404, retry.Policy{}, dispatch.Fail, "HTTP 404 Not Found"},
		{"409 listed by the policy", 409, retry.Policy{RetryableStatusCodes: []int{409}}, dispatch.Retry, "HTTP 409 Conflict"},
		{"503 not listed", 503, retry.Policy{RetryableStatusCodes: []int{409}}, dispatch.Fail, "HTTP 503 Service Unavailable"},
		{"204 succeeds", 204, retry.Policy{}, dispatch.Success, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d, url := setup(t, dispatch.Config{Guard: loopback}, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.status)
			})
			res := d.Send(context.Background(), dispatch.Request{Method: "POST", URL: url})
			if got := res.Outcome(&tt.policy); got != tt.want {
				t.Fatalf("Outcome = %v, want %v", got, tt.want)
			}
			if got := res.Message(); got != tt.wantMsg {
				t.Fatalf("Message = %q, want %q", got, tt.wantMsg)
			}
		})
	}
}

func TestSendRefusesLoopbackByDefault(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	for _, host := range []string{"127.0.0.1", "localhost"} {
		t.Run(host, func(t *testing.T) {
			t.Parallel()
			d, url := setup(t, dispatch.Config{}, func(w http.ResponseWriter, r *http.Request) { hits.Add(1) })
			url = strings.Replace(url, "127.0.0.1", host, 1)
			res := d.Send(context.Background(), dispatch.Request{Method: "GET", URL: url})
			if !errors.Is(res.Err, dispatch.ErrTargetRefused) {
				t.Fatalf("Send(%s) err = %v, want ErrTargetRefused", url, res.Err)
			}
			if got := res.Outcome(&retry.Policy{}); got != dispatch.Fail {
				t.Fatalf("Outcome = %v, want fail", got)
			}
		})
	}
	t.Cleanup(func() {
		if n := hits.Load(); n != 0 {
			t.Errorf("the target was reached %d times", n)
		}
	})
}

func TestSendAllowPrivate(t *testing.T) {
	t.Parallel()
	d, url := setup(t, dispatch.Config{Guard: dispatch.Guard{AllowPrivate: true}}, func(w http.ResponseWriter, r *http.Request) {})
	if res := d.Send(context.Background(), dispatch.Request{Method: "GET", URL: url}); res.Err != nil || res.Status != 200 {
		t.Fatalf("Send = %d, %v; want 200", res.Status, res.Err)
	}
}

func TestSendDoesNotFollowRedirects(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	d, url := setup(t, dispatch.Config{Guard: loopback}, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	})
	res := d.Send(context.Background(), dispatch.Request{Method: "GET", URL: url + "/here"})
	if res.Status != http.StatusFound || res.Err != nil {
		t.Fatalf("Send = %d, %v; want 302", res.Status, res.Err)
	}
	if got, want := res.Message(), "redirect not followed: HTTP 302 to /elsewhere"; got != want {
		t.Fatalf("Message = %q, want %q", got, want)
	}
	if got := res.Outcome(&retry.Policy{}); got != dispatch.Fail {
		t.Fatalf("Outcome = %v, want fail", got)
	}
	if got := hits.Load(); got != 1 {
		t.Fatalf("target hit %d times, want 1", got)
	}
}

func TestSendCapsTheResponse(t *testing.T) {
	t.Parallel()
	d, url := setup(t, dispatch.Config{Guard: loopback, KeepBytes: 9, MaxResponseBytes: 1000}, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "héllo wörld and a great deal more"+strings.Repeat("x", 1<<20))
	})
	res := d.Send(context.Background(), dispatch.Request{Method: "GET", URL: url})
	if res.Err != nil || res.Status != 200 {
		t.Fatalf("Send = %d, %v", res.Status, res.Err)
	}
	// 9 bytes end inside "ö": the cut character is dropped, not mangled.
	if got, want := res.Body, "héllo w"; got != want {
		t.Fatalf("Body = %q, want %q", got, want)
	}
}

func TestSendTimeoutIsRetried(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	d, url := setup(t, dispatch.Config{Guard: loopback, Timeout: 50 * time.Millisecond}, func(w http.ResponseWriter, r *http.Request) {
		<-release
	})
	defer close(release)
	res := d.Send(context.Background(), dispatch.Request{Method: "GET", URL: url})
	if !errors.Is(res.Err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a deadline", res.Err)
	}
	if got := res.Outcome(&retry.Policy{}); got != dispatch.Retry {
		t.Fatalf("Outcome = %v, want retry", got)
	}
}

func TestSendConnectionRefusedIsRetried(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	d := dispatch.New(dispatch.Config{Guard: loopback})
	defer d.Close()
	res := d.Send(context.Background(), dispatch.Request{Method: "GET", URL: "http://" + addr})
	if res.Err == nil || res.Status != 0 {
		t.Fatalf("Send = %d, %v; want a network error", res.Status, res.Err)
	}
	if got := res.Outcome(&retry.Policy{}); got != dispatch.Retry {
		t.Fatalf("Outcome = %v, want retry", got)
	}
}

func TestSendRetryAfter(t *testing.T) {
	t.Parallel()
	d, url := setup(t, dispatch.Config{Guard: loopback}, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	res := d.Send(context.Background(), dispatch.Request{Method: "GET", URL: url})
	if !res.HasRetryAfter || res.RetryAfter != 3*time.Second {
		t.Fatalf("RetryAfter = %v, %v; want 3s", res.RetryAfter, res.HasRetryAfter)
	}
}

func TestSendBadTargets(t *testing.T) {
	t.Parallel()
	d := dispatch.New(dispatch.Config{Guard: loopback})
	defer d.Close()
	for _, u := range []string{"ftp://127.0.0.1/x", "file:///etc/passwd", "http://", "::nope", "gopher://127.0.0.1:70/"} {
		res := d.Send(context.Background(), dispatch.Request{Method: "GET", URL: u})
		if !errors.Is(res.Err, dispatch.ErrBadTarget) {
			t.Errorf("Send(%q) err = %v, want ErrBadTarget", u, res.Err)
		}
		if got := res.Outcome(&retry.Policy{}); got != dispatch.Fail {
			t.Errorf("Send(%q) outcome = %v, want fail", u, got)
		}
	}
}
