package dispatch_test

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/service/dispatch"
)

// hostile is a target on 127.0.0.1 answering with h, over http:// and
// https://, with a Dispatcher that may call it.
type hostile struct {
	name string
	d    *dispatch.Dispatcher
	url  string
}

func hostileTargets(t *testing.T, cfg dispatch.Config, h http.HandlerFunc) []hostile {
	t.Helper()
	cfg.Guard = loopback
	plain := httptest.NewServer(h)
	t.Cleanup(plain.Close)
	tlsSrv := httptest.NewTLSServer(h)
	t.Cleanup(tlsSrv.Close)
	dPlain := dispatch.New(cfg)
	t.Cleanup(dPlain.Close)
	cfg.TLS = tlsSrv.Client().Transport.(*http.Transport).TLSClientConfig
	dTLS := dispatch.New(cfg)
	t.Cleanup(dTLS.Close)
	return []hostile{{"http", dPlain, plain.URL}, {"https", dTLS, tlsSrv.URL}}
}

// checkBounded fails unless s is valid UTF-8 of at most max bytes.
func checkBounded(t *testing.T, what, s string, max int) {
	t.Helper()
	if len(s) > max || !utf8.ValidString(s) {
		t.Errorf("%s: %d bytes (valid UTF-8: %v), want valid UTF-8 of at most %d; it starts %.80q",
			what, len(s), utf8.ValidString(s), max, s)
	}
}

// A redirect's Location, which a policy retrying 302 would store in every
// attempt's errorMessage and the task's lastError: a target answering one
// of 30 KB (as long as a response head may be; see TestSendBoundsHead for
// more) leaves at most MaxQuotedBytes of it in the Result, quoted in a
// Message of at most MaxMessageBytes, and marked where it was cut.
func TestSendBoundsLocation(t *testing.T) {
	t.Parallel()
	long := "/" + strings.Repeat("ab€", 30<<10/5)
	for _, loc := range []struct{ name, value string }{
		{"long", long},
		{"not UTF-8", "/x" + strings.Repeat("\xffa", 200)}, // 400 bytes; 800 as UTF-8
	} {
		targets := hostileTargets(t, dispatch.Config{}, func(w http.ResponseWriter, r *http.Request) {
			w.Header()["Location"] = []string{loc.value}
			w.WriteHeader(http.StatusFound)
		})
		for _, tg := range targets {
			t.Run(loc.name+"/"+tg.name, func(t *testing.T) {
				t.Parallel()
				res := tg.d.Send(context.Background(), dispatch.Request{Method: "GET", URL: tg.url})
				if res.Err != nil || res.Status != http.StatusFound {
					t.Fatalf("Send = %d, %v; want 302", res.Status, res.Err)
				}
				checkBounded(t, "Location", res.Location, dispatch.MaxQuotedBytes)
				if !strings.HasSuffix(res.Location, "…") || !strings.HasPrefix(res.Location, "/") {
					t.Errorf("Location = %.40q…%q, want the value's start, marked as cut", res.Location, res.Location[max(0, len(res.Location)-8):])
				}
				const prefix = "redirect not followed: HTTP 302 to "
				msg := res.Message()
				checkBounded(t, "Message", msg, len(prefix)+dispatch.MaxQuotedBytes)
				if !strings.HasPrefix(msg, prefix+"/") {
					t.Errorf("Message = %.60q, want %q and the Location", msg, prefix)
				}
				if loc.name == "long" && !strings.HasPrefix(long, strings.TrimSuffix(res.Location, "…")) {
					t.Errorf("Location %q is not the start of what the target sent", res.Location)
				}
			})
		}
	}
}

// A transport error that quotes what the target sent (here a status line
// of 900 KB) is cut to MaxMessageBytes in Result.Err and in Message, and is
// still the retried network error it was.
func TestSendBoundsErrorText(t *testing.T) {
	t.Parallel()
	targets := hostileTargets(t, dispatch.Config{}, func(w http.ResponseWriter, r *http.Request) {
		c, bw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = bw.WriteString("HTTP/1.1 " + strings.Repeat("9\xff", 450<<10) + " OK\r\nContent-Length: 0\r\n\r\n")
		_ = bw.Flush()
	})
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			res := tg.d.Send(context.Background(), dispatch.Request{Method: "GET", URL: tg.url})
			if res.Err == nil {
				t.Fatalf("Send = %d, nil error; want a malformed response", res.Status)
			}
			checkBounded(t, "Err", res.Err.Error(), dispatch.MaxMessageBytes)
			checkBounded(t, "Message", res.Message(), dispatch.MaxMessageBytes)
			if got := res.Outcome(&retry.Policy{}); got != dispatch.Retry {
				t.Errorf("Outcome = %v, want retry (a malformed answer is a network failure)", got)
			}
		})
	}
}

// A head longer than a response may have (a Location of 900 KB) is a
// malformed response: a retried network error, whose text quotes a bounded
// part of it.
func TestSendBoundsHead(t *testing.T) {
	t.Parallel()
	targets := hostileTargets(t, dispatch.Config{}, func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Location"] = []string{"/" + strings.Repeat("ab€", 900<<10/5)}
		w.WriteHeader(http.StatusFound)
	})
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			res := tg.d.Send(context.Background(), dispatch.Request{Method: "GET", URL: tg.url})
			if res.Err == nil || res.Status != 0 {
				t.Fatalf("Send = %d, %v; want an error", res.Status, res.Err)
			}
			checkBounded(t, "Err", res.Err.Error(), dispatch.MaxMessageBytes)
			checkBounded(t, "Message", res.Message(), dispatch.MaxMessageBytes)
			if got := res.Outcome(&retry.Policy{}); got != dispatch.Retry {
				t.Errorf("Outcome = %v, want retry", got)
			}
		})
	}
}

// The body kept for the attempt log is at most KeepBytes long, even when
// every other byte of it is not UTF-8 and becomes a three-byte U+FFFD.
func TestSendBoundsBody(t *testing.T) {
	t.Parallel()
	const keep = 100
	targets := hostileTargets(t, dispatch.Config{KeepBytes: keep}, func(w http.ResponseWriter, r *http.Request) {
		bw := bufio.NewWriter(w)
		for range 64 << 10 {
			_, _ = bw.WriteString("\xffA")
		}
		_ = bw.Flush()
	})
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			res := tg.d.Send(context.Background(), dispatch.Request{Method: "GET", URL: tg.url})
			if res.Err != nil || res.Status != 200 {
				t.Fatalf("Send = %d, %v; want 200", res.Status, res.Err)
			}
			checkBounded(t, "Body", res.Body, keep)
			if !strings.HasPrefix(res.Body, "\uFFFDA\uFFFDA") {
				t.Errorf("Body = %.40q, want the bytes it was sent, invalid ones replaced", res.Body)
			}
		})
	}
}

// Message bounds what it says whatever a Result holds, one not made by
// Send included.
func TestMessageBounds(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("x", 1<<20)
	tests := []struct {
		name string
		res  dispatch.Result
		max  int
	}{
		{"error", dispatch.Result{Err: errors.New(huge)}, dispatch.MaxMessageBytes},
		{"error not UTF-8", dispatch.Result{Err: errors.New(strings.Repeat("\xff", 100))}, dispatch.MaxMessageBytes},
		{"location", dispatch.Result{Status: 302, Location: huge}, len("redirect not followed: HTTP 302 to ") + dispatch.MaxQuotedBytes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			checkBounded(t, "Message", tt.res.Message(), tt.max)
		})
	}
}
