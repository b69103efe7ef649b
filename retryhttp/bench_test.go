package retryhttp_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/retrykit/retry/retryhttp"
)

// BenchmarkGet compares a successful GET to a loopback server through the
// Transport with the same GET through bare http.DefaultTransport: the
// difference is the Transport's overhead per request.
func BenchmarkGet(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	defer http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	for _, bb := range []struct {
		name string
		rt   http.RoundTripper
	}{
		{name: "bare", rt: http.DefaultTransport},
		{name: "retryhttp", rt: &retryhttp.Transport{}},
		{name: "retryhttp-timeout", rt: &retryhttp.Transport{AttemptTimeout: 10 * time.Second}},
	} {
		b.Run(bb.name, func(b *testing.B) {
			req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				resp, err := bb.rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}
