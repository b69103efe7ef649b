package api_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/retrykit/retry/service/api"
)

// BenchmarkTaskCreate measures POST /retry-tasks through the handler over a
// real SQLite store: decoding, checks, and one durable insert per task.
// Parallel requests share the store's group commits.
func BenchmarkTaskCreate(b *testing.B) {
	e := setup(b, options{})
	h, err := api.New(api.Config{Store: e.store})
	if err != nil {
		b.Fatal(err)
	}
	put := httptest.NewRequest("POST", "/retry-policies", strings.NewReader(`{"policyId":"p"}`))
	h.ServeHTTP(httptest.NewRecorder(), put)
	body := `{"targetUrl":"http://127.0.0.1:9/hook","policyId":"p","headers":{"Content-Type":"application/json"},"body":"{\"n\":1}"}`
	b.SetParallelism(32) // a server has many clients at once; they share fsyncs
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("POST", "/retry-tasks", strings.NewReader(body)))
			if rec.Code != http.StatusCreated {
				panic(fmt.Sprintf("status %d: %s", rec.Code, rec.Body))
			}
		}
	})
}

// BenchmarkTaskCreateBatch measures POST /retry-tasks/batch with 1,000 of
// BenchmarkTaskCreate's tasks: one request, one store call and one commit
// for all. It reports the cost per task.
func BenchmarkTaskCreateBatch(b *testing.B) {
	e := setup(b, options{})
	h, err := api.New(api.Config{Store: e.store})
	if err != nil {
		b.Fatal(err)
	}
	put := httptest.NewRequest("POST", "/retry-policies", strings.NewReader(`{"policyId":"p"}`))
	h.ServeHTTP(httptest.NewRecorder(), put)
	task := `{"targetUrl":"http://127.0.0.1:9/hook","policyId":"p","headers":{"Content-Type":"application/json"},"body":"{\"n\":1}"}`
	body := `{"tasks":[` + strings.Repeat(task+",", api.MaxBatchTasks-1) + task + `]}`
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/retry-tasks/batch", strings.NewReader(body)))
		if rec.Code != http.StatusOK || strings.Count(rec.Body.String(), `"status":201`) != api.MaxBatchTasks {
			b.Fatalf("status %d: %.300s", rec.Code, rec.Body)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*api.MaxBatchTasks), "ns/task")
}
