// Command flakytarget is a local HTTP endpoint for trying retryd: it answers
// 503 to the first --failures requests of each Idempotency-Key, then 200, and
// logs every request it gets.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
)

func main() {
	addr := flag.String("listen", "127.0.0.1:9090", "address to listen on")
	failures := flag.Int("failures", 2, "503s to answer per Idempotency-Key before a 200")
	flag.Parse()

	logger := slog.New(slog.NewTextHandler(os.Stdout, nil))
	var mu sync.Mutex
	seen := map[string]int{}
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		mu.Lock()
		seen[key]++
		n := seen[key]
		mu.Unlock()
		status := http.StatusOK
		if n <= *failures {
			status = http.StatusServiceUnavailable
		}
		logger.Info("request", "method", r.Method, "path", r.URL.Path, "idempotencyKey", key, "attempt", n, "status", status)
		w.WriteHeader(status)
		fmt.Fprintf(w, "attempt %d for key %s\n", n, key)
	})
	logger.Info("flakytarget listening", "addr", *addr, "failures", *failures)
	if err := http.ListenAndServe(*addr, nil); err != nil {
		logger.Error("listen", "error", err)
		os.Exit(1)
	}
}
