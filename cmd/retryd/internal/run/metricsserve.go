package run

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/retrykit/retry/service/api"
	"github.com/retrykit/retry/service/metrics"
	"github.com/retrykit/retry/service/store"
)

// Who may read /metrics. It shows every tenant's policy IDs and counts, so
// a tenant's token must not open it:
//
//   - With --metrics-token-file, only a request bearing one of its tokens
//     reads it, wherever it is served (Prometheus's authorization or
//     bearer_token_file). A token of the tokens file cannot be one of them.
//   - With --metrics-listen, /metrics (with /healthz and /readyz) is served
//     on that address and no longer on --listen's, open unless
//     --metrics-token-file is given.
//   - With --tokens-file and neither, /metrics on --listen answers 401 to
//     every request, as the API does to a request without a token: the API
//     keeps working (an upgrade does not stop retryd), and the scrape fails
//     with a message saying what is missing, also logged at startup.
//   - Without --tokens-file and either, /metrics is open, as before.

// metricsAccess reads --metrics-token-file, when given, and checks the
// metrics flags. tenants are the API's tokens (nil when authentication is
// off).
func metricsAccess(c Config, tenants *api.Tokens, log *slog.Logger) (*metrics.Tokens, error) {
	if c.MetricsMaxPolicies < 1 || c.MetricsMaxPoliciesPerTenant < 1 {
		return nil, usageError{fmt.Errorf("--metrics-max-policies (%d) and --metrics-max-policies-per-tenant (%d) must be at least 1",
			c.MetricsMaxPolicies, c.MetricsMaxPoliciesPerTenant)}
	}
	if c.MetricsMaxDestinations < 1 || c.MetricsMaxDestinationsPerTenant < 1 {
		return nil, usageError{fmt.Errorf("--metrics-max-destinations (%d) and --metrics-max-destinations-per-tenant (%d) must be at least 1",
			c.MetricsMaxDestinations, c.MetricsMaxDestinationsPerTenant)}
	}
	var mt *metrics.Tokens
	if c.MetricsTokenFile != "" {
		list, err := metrics.ReadTokenFile(c.MetricsTokenFile)
		if err != nil {
			return nil, fmt.Errorf("--metrics-token-file: %w", err)
		}
		for _, t := range list {
			if tenant, ok := tenants.Tenant(t); ok {
				return nil, usageError{fmt.Errorf("--metrics-token-file: a token there is also tenant %q's in --tokens-file: the metrics need a credential of their own", tenant)}
			}
		}
		if mt, err = metrics.NewTokens(list); err != nil {
			return nil, fmt.Errorf("--metrics-token-file: %w", err)
		}
		log.Info("metrics need a bearer token", "metrics_token_file", c.MetricsTokenFile, "tokens", len(list))
	}
	switch {
	case mt == nil && c.MetricsListen == "" && tenants != nil:
		log.Warn("/metrics answers 401 to every request: authentication is on, and the metrics have no credential " +
			"of their own (--metrics-token-file) nor a listener of their own (--metrics-listen)")
	case mt == nil && c.MetricsListen != "" && !loopbackOnly(c.MetricsListen):
		log.Warn("/metrics is served without a credential on "+c.MetricsListen+
			", reachable from other machines; every tenant's policy IDs show there (give --metrics-token-file)",
			"metrics_listen", c.MetricsListen)
	}
	return mt, nil
}

// closedMetrics is the 401's message of /metrics when nothing may read it.
const closedMetrics = "/metrics needs a credential of its own while authentication is on, and retryd has none: " +
	"start it with --metrics-token-file (or serve /metrics on --metrics-listen)"

// metricsHandler is /metrics as the flags say (see above).
func metricsHandler(m *metrics.Metrics, c Config, tenants *api.Tokens, mt *metrics.Tokens) (h http.Handler, access string) {
	switch {
	case mt != nil:
		return metrics.Guard(m.Handler(), mt, ""), "metrics token"
	case tenants != nil && c.MetricsListen == "":
		return metrics.Guard(m.Handler(), nil, closedMetrics), "closed"
	}
	return m.Handler(), "open"
}

// metricsMux is what --metrics-listen serves: /metrics and the probes;
// any other path answers the API's JSON 404.
func metricsMux(scrape http.Handler, st store.Store) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", scrape)
	mux.Handle("GET /healthz", metrics.Healthy())
	mux.Handle("GET /readyz", metrics.Ready(st))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		b, _ := json.Marshal(map[string]map[string]string{"error": {
			"code": api.CodeNotFound, "message": "no route for " + r.Method + " " + r.URL.Path + " (this listener serves GET /metrics, /healthz and /readyz)",
		}})
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write(append(b, '\n'))
	})
	return api.CanonicalPaths(mux)
}
