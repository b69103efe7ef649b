package dispatch

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"testing"
	"time"
)

// BenchmarkSend measures one attempt to a keep-alive target on 127.0.0.1
// through the Dispatcher's client (fasthttp and this package's transport)
// and, for comparison, through net/http's Transport (netHTTP, the
// reference of the tests), from 16 goroutines at once. The target is a minimal responder, so
// that the figures are mostly the client's; the CPU a real attempt costs
// retryd is in `retryd bench`.
func BenchmarkSend(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					if _, err := io.WriteString(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy"); err != nil {
						return
					}
				}
			}()
		}
	}()
	target := "http://" + ln.Addr().String() + "/hook"
	u, _ := url.Parse(target)
	r := Request{Method: "POST", URL: target, Headers: map[string]string{"Content-Type": "application/json"},
		Body: []byte(`{"order":42}`), IdempotencyKey: "0c6f8a3e-5b1d-4c2f-9d7e-2a1b3c4d5e6f"}
	d := New(Config{Guard: Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}})
	defer d.Close()
	ref := newNetHTTP(nil, 0, 0, 0)
	defer ref.Close()
	for _, tc := range []struct {
		name string
		send func(ctx context.Context, res *Result) error
	}{
		{"client=fasthttp", func(ctx context.Context, res *Result) error {
			deadline, _ := ctx.Deadline()
			return d.do(ctx, deadline, u, &r, res)
		}},
		{"client=net-http", func(ctx context.Context, res *Result) error { return ref.send(ctx, u, &r, res) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(8) // 16 goroutines on 2 CPUs
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					res := Result{Start: time.Now()}
					err := tc.send(ctx, &res)
					cancel()
					if err != nil || res.Status != 503 || res.Body != "busy" {
						b.Errorf("send = %d %q, %v", res.Status, res.Body, err)
						return
					}
				}
			})
		})
	}
}
