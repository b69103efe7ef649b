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

// TestClientsAgree sends the same requests to the same handlers through
// the Dispatcher over http:// and https://, and through net/http (the
// reference): a target must not see, nor an attempt record, anything
// different.
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
	send := func(t *testing.T, tls, ref bool, h http.HandlerFunc, r dispatch.Request) outcome {
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
		r.URL = srv.URL + r.URL
		var res dispatch.Result
		if ref {
			n := dispatch.NewNetHTTP(cfg.TLS, cfg.KeepBytes, cfg.MaxResponseBytes, cfg.Timeout)
			defer n.Close()
			res = n.Send(context.Background(), r)
		} else {
			d := dispatch.New(cfg)
			defer d.Close()
			res = d.Send(context.Background(), r)
		}
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
				ref := send(t, false, true, h, r)
				for via, got := range map[string]outcome{"http": send(t, false, false, h, r), "https": send(t, true, false, h, r)} {
					if got.seen != ref.seen {
						t.Errorf("the target saw\n%+v over %s and\n%+v from net/http", got.seen, via, ref.seen)
					}
					p, s := got.res, ref.res
					if p.Status != s.Status || p.Body != s.Body || p.Location != s.Location ||
						p.RetryAfter != s.RetryAfter || p.HasRetryAfter != s.HasRetryAfter ||
						got.outcome != ref.outcome || (p.Err == nil) != (s.Err == nil) {
						t.Errorf("%s: %+v (%v)\nnet/http: %+v (%v)", via, p, got.outcome, s, ref.outcome)
					}
					if p.Err == nil && got.msg != ref.msg {
						t.Errorf("messages differ: %q over %s, %q from net/http", got.msg, via, ref.msg)
					}
				}
			})
		}
	}
}

// The request target, the Host and the credentials a target sees are
// those net/http would send for the same URL: the path as the URL has it
// (not cleaned, escaped as URL.RequestURI escapes it), the query as it is,
// the URL's host, and no Authorization made of the URL's userinfo.
func TestRequestTargetAsNetHTTP(t *testing.T) {
	t.Parallel()
	type seen struct{ uri, host, auth string }
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.RequestURI, r.Host, r.Header.Get("Authorization")}
	}))
	t.Cleanup(srv.Close)
	d := dispatch.New(dispatch.Config{Guard: loopback})
	t.Cleanup(d.Close)
	ref := dispatch.NewNetHTTP(nil, 0, 0, time.Second)
	t.Cleanup(ref.Close)
	hostPort := strings.TrimPrefix(srv.URL, "http://")
	for _, u := range []string{
		"/", "", "?", "?x=1", "/a/b//c/../d", "/a%2Fb", "/%7Euser/é", "/a b", "/x?q=a b&r=%zz", "/p;params?x#frag",
		"/" + strings.Repeat("x/", 100),
	} {
		for _, base := range []string{"http://" + hostPort, "http://user:secret@" + hostPort} {
			url := base + u
			var (
				s      [2]seen
				status [2]int
			)
			for i, send := range []func(context.Context, dispatch.Request) dispatch.Result{d.Send, ref.Send} {
				res := send(context.Background(), dispatch.Request{Method: "GET", URL: url})
				status[i] = res.Status
				select {
				case s[i] = <-got:
				default: // refused by the server (a space in the query)
				}
			}
			if s[0] != s[1] || status[0] != status[1] {
				t.Errorf("%s: the target saw %+v (answering %d), from net/http %+v (%d)", url, s[0], status[0], s[1], status[1])
			}
		}
	}
}
