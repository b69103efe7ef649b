package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/service/api"
	"github.com/retrykit/retry/service/metrics"
	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/sqlite"
)

type overview struct {
	Counts      map[string]int64
	DeadLetters int64
	Store       struct {
		Ready bool
		Error string
	}
	StepSeconds int
	Series      []struct {
		At                                             int64
		Succeeded, Retrying, Exhausted, Failed, Lagged int64
		LagP50Ms, LagP99Ms                             float64
	}
}

// total adds up the outcomes of o's steps.
func total(o overview) (sum struct{ Succeeded, Retrying, Exhausted, Failed, Lagged int64 }) {
	for _, st := range o.Series {
		sum.Succeeded += st.Succeeded
		sum.Retrying += st.Retrying
		sum.Exhausted += st.Exhausted
		sum.Failed += st.Failed
		sum.Lagged += st.Lagged
	}
	return sum
}

// GET /overview counts one tenant's tasks only, and draws the history its
// scheduler recorded, on every store.
func TestOverview(t *testing.T) {
	eachBackend(t, func(t *testing.T, backend string) {
		var st store.Store
		if backend == "sqlite" {
			sq, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "retryd.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { sq.Close() })
			st = sq
		} else {
			st = openBackend(t, backend)
		}
		m := metrics.New(nil, nil, metrics.Limits{})
		tokens, err := api.ParseTokens(strings.NewReader(tokenA + " tenant-a\n" + tokenB + " tenant-b\n"))
		if err != nil {
			t.Fatal(err)
		}
		h, err := api.New(api.Config{Store: st, Tokens: tokens, History: m})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		ctx := context.Background()
		for i := range 3 {
			tenant := "tenant-a"
			if i == 2 {
				tenant = "tenant-b"
			}
			if _, _, err := st.TaskCreate(ctx, &store.Task{Tenant: tenant, TargetURL: "http://127.0.0.1:1/", Method: "POST", PolicyID: "p"}); err != nil {
				t.Fatal(err)
			}
		}
		m.ObserveTenant(ctx, "tenant-a", retry.Event{Outcome: retry.Succeeded})
		m.ObserveTenant(ctx, "tenant-a", retry.Event{Outcome: retry.GaveUp, Reason: retry.ErrAttemptsExhausted})
		m.ObserveTenant(ctx, "tenant-b", retry.Event{Outcome: retry.GaveUp, Reason: retry.ErrNotRetryable})
		m.Lag("tenant-a", 20*time.Millisecond)

		get := func(token string) (int, overview) {
			req, _ := http.NewRequest("GET", srv.URL+"/overview", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var o overview
			if resp.StatusCode == http.StatusOK {
				if err := json.Unmarshal(b, &o); err != nil {
					t.Fatalf("%v in %s", err, b)
				}
			}
			return resp.StatusCode, o
		}
		if code, _ := get("not-a-token"); code != http.StatusUnauthorized {
			t.Fatalf("an unknown token got %d", code)
		}
		code, o := get(tokenA)
		if code != http.StatusOK || !o.Store.Ready || o.Counts["PENDING"] != 2 || o.DeadLetters != 0 || len(o.Counts) != 6 {
			t.Fatalf("tenant a's overview: %d %+v", code, o)
		}
		if o.StepSeconds != 10 || len(o.Series) != 360 {
			t.Fatalf("series of %d steps of %d s, want 360 of 10", len(o.Series), o.StepSeconds)
		}
		// The events are seconds old at most, but a step may have begun
		// between them: they are summed over the series, not read from
		// its last step alone.
		sum, lagP50 := total(o), 0.0
		for _, st := range o.Series {
			if st.Lagged > 0 {
				lagP50 = st.LagP50Ms
			}
		}
		if sum.Succeeded != 1 || sum.Exhausted != 1 || sum.Failed != 0 || sum.Lagged != 1 || lagP50 < 17 || lagP50 > 23 {
			t.Fatalf("tenant a's steps add up to %+v, lag p50 %v ms", sum, lagP50)
		}
		_, o = get(tokenB)
		if sum := total(o); o.Counts["PENDING"] != 1 || sum.Failed != 1 || sum.Succeeded != 0 {
			t.Fatalf("tenant b's overview: %+v, steps adding up to %+v", o.Counts, sum)
		}
	})
}
