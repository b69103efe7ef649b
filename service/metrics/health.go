package metrics

import (
	"context"
	"net/http"
	"time"
)

// Pinger is what Ready needs from a store. store.Store satisfies it.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Healthy serves /healthz: 200 "ok" whenever the process can answer.
func Healthy() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
}

// Ready serves /readyz: 200 when p answers a ping within two seconds, 503
// with the reason otherwise.
func Ready(p Pinger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := p.Ping(ctx); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("store unavailable: " + err.Error() + "\n"))
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
}
