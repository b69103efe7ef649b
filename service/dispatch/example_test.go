package dispatch_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/service/dispatch"
)

func ExampleGuard_Check() {
	g := dispatch.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}}
	for _, a := range []string{"10.0.0.7", "10.0.1.7", "169.254.169.254", "8.8.8.8"} {
		fmt.Println(a, g.Check(netip.MustParseAddr(a)))
	}
	// Output:
	// 10.0.0.7 <nil>
	// 10.0.1.7 target address refused: 10.0.1.7 is private
	// 169.254.169.254 target address refused: 169.254.169.254 is cloud metadata
	// 8.8.8.8 <nil>
}

func ExampleDispatcher_Send() {
	// A target that is busy once, then accepts.
	busy := true
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if busy {
			busy = false
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, "order accepted (key %s)", r.Header.Get("Idempotency-Key"))
	}))
	defer target.Close()

	d := dispatch.New(dispatch.Config{Guard: dispatch.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}})
	defer d.Close()
	policy := &retry.Policy{}
	for range 2 {
		res := d.Send(context.Background(), dispatch.Request{Method: "POST", URL: target.URL + "/orders",
			Body: []byte(`{"order":42}`), IdempotencyKey: "order-42"})
		fmt.Printf("%d %s %q retry-after=%v\n", res.Status, res.Outcome(policy), res.Body, res.RetryAfter)
	}
	// Output:
	// 503 retry "" retry-after=2s
	// 200 success "order accepted (key order-42)" retry-after=0s
}
