package api

import (
	"context"
	"net/http"
	"time"

	"github.com/retrykit/retry/service/metrics"
	"github.com/retrykit/retry/service/store"
)

// History reports a tenant's recent activity, for GET /overview;
// *metrics.Metrics is one. Each process keeps its own: on a store several
// instances share, an instance's overview shows the attempts its own
// scheduler made.
type History interface {
	Recent(tenant string) []metrics.Sample
}

// overviewJSON is GET /overview's answer: the tenant's tasks by state, its
// dead letters, whether the store answers, and the last hour's attempts by
// outcome and dispatch lag, one point per step.
type overviewJSON struct {
	Now         int64                  `json:"now"`
	Counts      map[store.Status]int64 `json:"counts"`
	DeadLetters int64                  `json:"deadLetters"`
	Store       storeHealthJSON        `json:"store"`
	StepSeconds int                    `json:"stepSeconds"`
	Series      []sampleJSON           `json:"series"`
}

type storeHealthJSON struct {
	Ready bool   `json:"ready"`
	Error string `json:"error,omitempty"`
}

type sampleJSON struct {
	At        int64   `json:"at"`
	Succeeded int64   `json:"succeeded"`
	Retrying  int64   `json:"retrying"`
	Exhausted int64   `json:"exhausted"`
	Failed    int64   `json:"failed"`
	Lagged    int64   `json:"lagged"`
	LagP50Ms  float64 `json:"lagP50Ms"`
	LagP99Ms  float64 `json:"lagP99Ms"`
}

// pingTimeout bounds the readiness check of GET /overview, so that a store
// that hangs shows as not ready instead of stalling the console.
const pingTimeout = 2 * time.Second

func (s *server) overview(w http.ResponseWriter, r *http.Request, tenant string) error {
	counts, err := s.store.TenantCounts(r.Context(), tenant)
	out := overviewJSON{Now: s.now().UnixMilli(), Counts: counts, StepSeconds: int(metrics.HistoryStep / time.Second), Series: []sampleJSON{}}
	if err != nil {
		// A store that can't count is what the overview must show, not hide
		// behind a 500: it reports the store as not ready.
		out.Store.Error = err.Error()
	} else {
		out.DeadLetters = counts[store.Exhausted] + counts[store.Failed]
		ctx, cancel := context.WithTimeout(r.Context(), pingTimeout)
		defer cancel()
		if err := s.store.Ping(ctx); err != nil {
			out.Store.Error = err.Error()
		} else {
			out.Store.Ready = true
		}
	}
	if s.history != nil {
		for _, p := range s.history.Recent(tenant) {
			out.Series = append(out.Series, sampleJSON{
				At: p.At.UnixMilli(), Succeeded: p.Succeeded, Retrying: p.Retrying, Exhausted: p.Exhausted, Failed: p.Failed,
				Lagged: p.Lagged, LagP50Ms: millis(p.LagP50), LagP99Ms: millis(p.LagP99),
			})
		}
	}
	s.writeJSON(w, http.StatusOK, out)
	return nil
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
