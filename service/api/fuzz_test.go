package api_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/retrykit/retry/service/api"
	"github.com/retrykit/retry/service/blob"
	"github.com/retrykit/retry/service/blob/disk"
	"github.com/retrykit/retry/service/store"
)

// fuzzBody sends body to path through the real handler over a real store
// and checks the answer: never a 5xx, always JSON, an error always in the
// API's shape, and a refused request leaves nothing behind (no record, and
// no blob unless it is a 409, which is known only once the body is
// stored). ok, when set, checks a 2xx answer further, given the change of
// count it made. configure, when set, changes the handler's Config.
func fuzzBody(f *testing.F, path string, seeds []string, count func(t *testing.T, st store.Store) int64,
	ok func(t *testing.T, body string, answer []byte, added int64), configure ...func(*api.Config)) {
	e := setup(f, options{maxBody: 4096})
	cfg := api.Config{Store: e.store, MaxBodyBytes: 4096, MaxBatchBodyBytes: 16384}
	for _, c := range configure {
		c(&cfg)
	}
	h, err := api.New(cfg)
	if err != nil {
		f.Fatal(err)
	}
	blobs := func(t *testing.T) int {
		n := 0
		if cfg.Blobs != nil {
			if err := cfg.Blobs.List(context.Background(), func(blob.Info) error { n++; return nil }); err != nil {
				t.Fatal(err)
			}
		}
		return n
	}
	if _, _, err := e.store.PolicyPut(context.Background(), &store.Policy{Tenant: api.DefaultTenant, ID: "p", Spec: []byte(`{"maxAttempts":3}`)}); err != nil {
		f.Fatal(err)
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		before, blobsBefore := count(t, e.store), blobs(t)
		req := httptest.NewRequest("POST", path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)

		if rec.Code >= 500 {
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Fatalf("Content-Type %q for %q", ct, body)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
			t.Fatalf("answer %q to %q is not a JSON object: %v", rec.Body, body, err)
		}
		if rec.Code >= 400 {
			var ae struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			if json.Unmarshal(rec.Body.Bytes(), &ae) != nil || len(m) != 1 || ae.Error.Code == "" || ae.Error.Message == "" {
				t.Fatalf("error answer %q to %q is not the API's error shape", rec.Body, body)
			}
			if after := count(t, e.store); after != before {
				t.Fatalf("refused %q, yet the store went from %d to %d records", body, before, after)
			}
			if after := blobs(t); after != blobsBefore && rec.Code != 409 {
				t.Fatalf("refused %q (%d), yet the blob store went from %d to %d blobs", body, rec.Code, blobsBefore, after)
			}
		} else if ok != nil {
			ok(t, body, rec.Body.Bytes(), count(t, e.store)-before)
		}
	})
}

// countTasks counts every tenant's tasks.
func countTasks(t *testing.T, st store.Store) int64 {
	counts, err := st.TaskCounts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, c := range counts {
		n += c
	}
	return n
}

func FuzzTaskCreate(f *testing.F) {
	seeds := []string{
		`{"targetUrl":"http://example.com/","policyId":"p"}`,
		`{"targetUrl":"https://example.com/a?b=c","method":"put","headers":{"X-A":"1"},"body":"x","policyId":"p","idempotencyKey":"k"}`,
		`{"targetUrl":"http://h/","policyId":"p","bodyBase64":"AAEC"}`,
		`{"targetUrl":"http://h/","policyId":"p","headers":{"X":"a\r\nb"}}`,
		`{"targetUrl":"http://h/","policyId":"p","headers":{"X":"1","X":"2"}}`,
		`{"targetUrl":"ftp://h/","policyId":"nope","method":"GE T"}`,
		`{"targetUrl":null,"policyId":"p","body":"a","bodyBase64":"YQ=="}`,
		`{} {}`, `[]`, `null`, ``, `{"a":[{"b":{}}]}`, "{\"body\":\"\xff\"}",
		`{"targetUrl":"http://h:99999/","policyId":"p","body":"\ud800","headers":{"X":"\ud83d\ude00\udc00"}}`,
	}
	fuzzBody(f, "/retry-tasks", seeds, countTasks, nil)
}

// withBlobs gives the handler an embedded blob store that takes every body
// over 8 bytes, and lets bodyRefs name s3://fuzz-bucket/ok/.
func withBlobs(f *testing.F) func(*api.Config) {
	b, err := disk.Open(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { b.Close() })
	return func(c *api.Config) {
		c.Blobs, c.BlobThreshold, c.MaxLargeBodyBytes, c.AllowBodyRefs = b, 8, 64<<10, []string{"s3://fuzz-bucket/ok/"}
	}
}

// blobSeeds are tasks whose bodies the blob store takes, or by reference.
var blobSeeds = []string{
	`{"targetUrl":"http://h/","policyId":"p","body":"a body over eight bytes, \n\u00e9 and \ud83d\ude00"}`,
	`{"targetUrl":"http://h/","policyId":"p","idempotencyKey":"k","bodyBase64":"aGVsbG8sIHdvcmxkIQ=="}`,
	`{"targetUrl":"http://h/","policyId":"p","idempotencyKey":"k","body":"hello, world?"}`,
	`{"targetUrl":"http://h/","policyId":"p","body":"a body over eight bytes","bodyRef":"s3://fuzz-bucket/ok/x"}`,
	`{"targetUrl":"http://h/","policyId":"p","bodyRef":"s3://fuzz-bucket/ok/x"}`,
	`{"targetUrl":"http://h/","policyId":"p","bodyRef":"s3://fuzz-bucket/no/x"}`,
	`{"targetUrl":"http://h/","policyId":"nope","body":"a body over eight bytes"}`,
	`{"targetUrl":"http://h/","policyId":"p","body":"a body over eight bytes","x":1}`,
	`{"targetUrl":"http://h/","policyId":"p","body":"a body over eight bytes\ud800"}`,
}

// FuzzTaskCreateBlobs is FuzzTaskCreate with a blob store: bodies streamed
// into it, bodyRefs, and no blob left by a refused request.
func FuzzTaskCreateBlobs(f *testing.F) {
	fuzzBody(f, "/retry-tasks", blobSeeds, countTasks, nil, withBlobs(f))
}

// FuzzTaskCreateBatch checks, beyond fuzzBody's rules, that a batch answers
// one well-formed item per task and stores exactly the tasks it says it
// created.
func FuzzTaskCreateBatch(f *testing.F) {
	seeds := []string{
		`{"tasks":[{"targetUrl":"http://example.com/","policyId":"p"}]}`,
		`{"tasks":[{"targetUrl":"http://h/","policyId":"p","idempotencyKey":"k"},{"targetUrl":"http://h/","policyId":"p","idempotencyKey":"k"},{"targetUrl":"http://h/x","policyId":"p","idempotencyKey":"k"}]}`,
		`{"tasks":[{"targetUrl":"ftp://h/","policyId":"nope"},5,null,[],"x",{"targetUrl":"http://h/","policyId":"p","notBefore":1e400}]}`,
		`{"tasks":[{"targetUrl":"http://h/","policyId":"p","notBefore":1750000000000.5}]}`,
		`{"tasks":[{"targetUrl":"http://h/","policyId":"p","notBefore":"soon","headers":{"X":"1","X":"2"}}]}`,
		`{"tasks":[{"targetUrl":"http://h/","policyId":"p","bodyBase64":"AAEC","method":"put"}],"tasks":[]}`,
		`{"tasks":[]}`, `{"tasks":{}}`, `{"tasks":null}`, `{}`, `{"task":[]}`, `[]`, ``, `{"tasks":[{}]} {}`,
		"{\"tasks\":[{\"body\":\"\xff\"}]}",
		`{"tasks":[{"targetUrl":"http://h/","policyId":"p","body":"\ud800"},{"targetUrl":"http://h/","policyId":"p","body":"\ud83d\ude00"}]}`,
	}
	fuzzBody(f, "/retry-tasks/batch", seeds, countTasks, checkBatchAnswer)
}

// FuzzTaskCreateBatchBlobs is FuzzTaskCreateBatch with a blob store.
func FuzzTaskCreateBatchBlobs(f *testing.F) {
	seeds := []string{`{"tasks":[` + strings.Join(blobSeeds, ",") + `]}`}
	for _, s := range blobSeeds {
		seeds = append(seeds, `{"tasks":[`+s+`]}`)
	}
	fuzzBody(f, "/retry-tasks/batch", seeds, countTasks, checkBatchAnswer, withBlobs(f))
}

// checkBatchAnswer checks, beyond fuzzBody's rules, that a batch answers
// one well-formed item per task and stores exactly the tasks it says it
// created.
func checkBatchAnswer(t *testing.T, body string, answer []byte, added int64) {
	var got struct {
		Items []struct {
			Status int `json:"status"`
			Task   *struct {
				TaskID string `json:"taskId"`
			} `json:"task"`
			Error *struct{ Code, Message, Field string } `json:"error"`
		} `json:"items"`
	}
	if err := json.Unmarshal(answer, &got); err != nil || len(got.Items) == 0 || len(got.Items) > api.MaxBatchTasks {
		t.Fatalf("answer %s to %q is not 1 to %d items (%v)", answer, body, api.MaxBatchTasks, err)
	}
	var created int64
	for i, it := range got.Items {
		switch {
		case (it.Status == 200 || it.Status == 201) && it.Task != nil && it.Task.TaskID != "" && it.Error == nil:
			if it.Status == 201 {
				created++
			}
		case (it.Status == 400 || it.Status == 409) && it.Task == nil && it.Error != nil && it.Error.Code != "" && it.Error.Message != "" &&
			strings.HasPrefix(it.Error.Field, "tasks["+strconv.Itoa(i)+"]"):
		default:
			t.Fatalf("item %d of the answer %s to %q is malformed", i, answer, body)
		}
	}
	if created != added {
		t.Fatalf("answer %s to %q says %d created, the store gained %d", answer, body, created, added)
	}
}

func FuzzPolicyPut(f *testing.F) {
	seeds := []string{
		`{"policyId":"a"}`,
		`{"policyId":"b","backoff":"LINEAR","initialDelayMs":10,"incrementMs":5,"maxDelayMs":100,"maxAttempts":4}`,
		`{"policyId":"c","backoff":"FIXED","jitterType":"DECORRELATED","initialDelayMs":0}`,
		`{"policyId":"d","jitterType":"PROPORTIONAL","jitterFactor":1.5,"retryableStatusCodes":[99,600]}`,
		`{"policyId":"e","multiplier":1e308,"maxDelayMs":1e300,"totalBudgetMs":9223372036854775807}`,
		`{"policyId":"a","maxAttempts":7}`,
		`{"policyId":"","maxAttempts":-1}`, `{"policyId":["x"]}`, `{"policyId":"x","policyId":"y"}`,
	}
	fuzzBody(f, "/retry-policies", seeds, func(t *testing.T, st store.Store) int64 {
		items, _, err := st.PolicyList(context.Background(), api.DefaultTenant, store.Page{Limit: store.MaxPageLimit})
		if err != nil {
			t.Fatal(err)
		}
		return int64(len(items))
	}, nil)
}
