package dispatch_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/service/dispatch"
)

// TestClientsAgree sends the same requests to the same handlers over
// http:// (the dispatcher's own HTTP/1.1 client) and https:// (net/http):
// a target must not see, nor an attempt record, anything different.
func TestClientsAgree(t *testing.T) {
	t.Parallel()
	type seen struct {
		method, uri, host, key, agent, custom, length, body string
	}
	handlers := map[string]http.HandlerFunc{
		"created": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, "made it")
		},
		"retry after": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusServiceUnavailable)
		},
		"redirect": func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		},
		"streamed, cut at a character": func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "héllo wörld")
			w.(http.Flusher).Flush() // chunked over HTTP/1.1
			_, _ = io.WriteString(w, strings.Repeat("x", 1<<20))
		},
		"slow": func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			// No answer at all: returning would send a 200 that a loaded
			// machine could deliver just before the client's deadline.
			panic(http.ErrAbortHandler)
		},
	}
	requests := []dispatch.Request{
		{Method: "PUT", URL: "/orders/7?x=1", Headers: map[string]string{"X-Custom": "yes", "Host": "orders.example"},
			Body: []byte(`{"n":7}`), IdempotencyKey: "key-1"},
		{Method: "GET", URL: "/"},
		{Method: "DELETE", URL: "/x", Headers: map[string]string{"User-Agent": "mine/1", "Content-Length": "12"}},
	}
	type outcome struct {
		res     dispatch.Result
		seen    seen
		outcome dispatch.Outcome
		msg     string
	}
	send := func(t *testing.T, tls bool, h http.HandlerFunc, r dispatch.Request) outcome {
		got := make(chan seen, 1)
		wrapped := func(w http.ResponseWriter, req *http.Request) {
			b, _ := io.ReadAll(req.Body)
			select {
			case got <- seen{req.Method, req.RequestURI, req.Host, req.Header.Get("Idempotency-Key"),
				req.Header.Get("User-Agent"), req.Header.Get("X-Custom"), req.Header.Get("Content-Length"), string(b)}:
			default:
			}
			h(w, req)
		}
		cfg := dispatch.Config{Guard: loopback, KeepBytes: 9, MaxResponseBytes: 1000, Timeout: 300 * time.Millisecond}
		var srv *httptest.Server
		if tls {
			srv = httptest.NewTLSServer(http.HandlerFunc(wrapped))
			cfg.TLS = srv.Client().Transport.(*http.Transport).TLSClientConfig
		} else {
			srv = httptest.NewServer(http.HandlerFunc(wrapped))
		}
		defer srv.Close()
		d := dispatch.New(cfg)
		defer d.Close()
		r.URL = srv.URL + r.URL
		res := d.Send(context.Background(), r)
		var s seen
		select {
		case s = <-got:
		default:
		}
		if s.host == strings.TrimPrefix(strings.TrimPrefix(srv.URL, "https://"), "http://") {
			s.host = "the target"
		}
		return outcome{res: res, seen: s, outcome: res.Outcome(&retry.Policy{}), msg: res.Message()}
	}
	for name, h := range handlers {
		for _, r := range requests {
			t.Run(name+"/"+r.Method, func(t *testing.T) {
				t.Parallel()
				plain, tls := send(t, false, h, r), send(t, true, h, r)
				if plain.seen != tls.seen {
					t.Errorf("the target saw\n%+v over http and\n%+v over https", plain.seen, tls.seen)
				}
				p, s := plain.res, tls.res
				if p.Status != s.Status || p.Body != s.Body || p.Location != s.Location ||
					p.RetryAfter != s.RetryAfter || p.HasRetryAfter != s.HasRetryAfter ||
					plain.outcome != tls.outcome || (p.Err == nil) != (s.Err == nil) {
					t.Errorf("http: %+v (%v)\nhttps: %+v (%v)", p, plain.outcome, s, tls.outcome)
				}
				if p.Err == nil && plain.msg != tls.msg {
					t.Errorf("messages differ: %q over http, %q over https", plain.msg, tls.msg)
				}
			})
		}
	}
}
