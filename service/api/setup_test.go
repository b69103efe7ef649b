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

	"github.com/retrykit/retry/service/api"
	"github.com/retrykit/retry/service/blob/disk"
	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/sqlite"
)

// Bearer tokens of the two tenants of multi-tenant tests.
const (
	tokenA = "token-of-tenant-a-0123456789"
	tokenB = "token-of-tenant-b-0123456789"
)

// env is a real API server over a real store: a SQLite file, or with
// options.backend PostgreSQL or Redis.
type env struct {
	srv   *httptest.Server
	store *sqlite.Store // nil on another backend
	st    store.Store   // the store, whichever the backend
	blobs *disk.Store   // nil unless options.blobs
	token string        // sent by do unless a call overrides it
}

type options struct {
	tokens       bool  // authentication on, with tokenA and tokenB
	maxBody      int64 // Config.MaxBodyBytes
	maxBatchBody int64 // Config.MaxBatchBodyBytes
	waker        api.Waker
	now          func() time.Time              // Config.Now
	wrap         func(store.Store) store.Store // what the API sees of the store, when set
	policyCache  int                           // Config.PolicyCacheSize
	blobs        bool                          // an embedded blob store (Config.Blobs)
	threshold    int64                         // Config.BlobThreshold
	maxLarge     int64                         // Config.MaxLargeBodyBytes
	allowRefs    []string                      // Config.AllowBodyRefs
	refsA        string                        // the bodyRef prefixes of tenant-a's line of the tokens file
	backend      string                        // "" or "sqlite", "postgres", "redis" (see openBackend)
}

func setup(t testing.TB, o options) *env {
	t.Helper()
	var st store.Store
	e := &env{}
	if o.backend == "" || o.backend == "sqlite" {
		sq, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "retryd.db"))
		if err != nil {
			t.Fatalf("sqlite.Open: %v", err)
		}
		t.Cleanup(func() { sq.Close() })
		st, e.store = sq, sq
	} else {
		st = openBackend(t, o.backend)
	}
	e.st = st
	var err error
	cfg := api.Config{Store: st, MaxBodyBytes: o.maxBody, MaxBatchBodyBytes: o.maxBatchBody,
		Waker: o.waker, Now: o.now, PolicyCacheSize: o.policyCache}
	if o.wrap != nil {
		cfg.Store = o.wrap(st)
	}
	if o.blobs {
		if e.blobs, err = disk.Open(filepath.Join(t.TempDir(), "retryd.blobs")); err != nil {
			t.Fatalf("disk.Open: %v", err)
		}
		t.Cleanup(func() { e.blobs.Close() })
		cfg.Blobs, cfg.BlobThreshold, cfg.MaxLargeBodyBytes, cfg.AllowBodyRefs = e.blobs, o.threshold, o.maxLarge, o.allowRefs
	}
	if o.tokens {
		cfg.Tokens, err = api.ParseTokens(strings.NewReader(tokenA + " tenant-a " + o.refsA + "\n" + tokenB + " tenant-b\n"))
		if err != nil {
			t.Fatalf("ParseTokens: %v", err)
		}
		e.token = tokenA
	}
	h, err := api.New(cfg)
	if err != nil {
		t.Fatalf("api.New: %v", err)
	}
	e.srv = httptest.NewServer(h)
	t.Cleanup(e.srv.Close)
	return e
}

// response is an answer, its body read.
type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request with e.token and a JSON Content-Type when there is a body.
func (e *env) do(t *testing.T, method, path, body string) response {
	t.Helper()
	return e.doWith(t, method, path, body, map[string]string{"Authorization": "Bearer " + e.token})
}

// doWith sends a request with exactly the given headers (and a JSON
// Content-Type when there is a body and hdr names none).
func (e *env) doWith(t *testing.T, method, path, body string, hdr map[string]string) response {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, r)
	if err != nil {
		t.Fatalf("NewRequest: %v", err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		if k == "Content-Type" && v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading %s %s: %v", method, path, err)
	}
	return response{resp.StatusCode, resp.Header, b}
}

// decode decodes the body into a map, failing the test if it is not JSON.
func (r response) decode(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", r.body, err)
	}
	return m
}

// wantStatus fails the test unless the status is want.
func (r response) wantStatus(t *testing.T, want int) map[string]any {
	t.Helper()
	if r.status != want {
		t.Fatalf("status = %d, want %d; body %s", r.status, want, r.body)
	}
	return r.decode(t)
}

// wantError checks an error answer: its status, the JSON error shape, its
// code and the field it names.
func (r response) wantError(t *testing.T, status int, code, field string) map[string]any {
	t.Helper()
	m := r.wantStatus(t, status)
	if got := r.header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", got)
	}
	e, ok := m["error"].(map[string]any)
	if !ok || len(m) != 1 {
		t.Fatalf("body %s is not {\"error\": {...}}", r.body)
	}
	if got, _ := e["code"].(string); got != code {
		t.Errorf("code = %q, want %q; body %s", got, code, r.body)
	}
	if got, _ := e["field"].(string); got != field {
		t.Errorf("field = %q, want %q; body %s", got, field, r.body)
	}
	if msg, _ := e["message"].(string); msg == "" {
		t.Errorf("empty message; body %s", r.body)
	}
	return e
}

// putPolicy registers a policy and fails the test unless it is created.
func (e *env) putPolicy(t *testing.T, body string) {
	t.Helper()
	e.do(t, "POST", "/retry-policies", body).wantStatus(t, http.StatusCreated)
}

// createTask submits a task and returns the answer's object.
func (e *env) createTask(t *testing.T, body string) map[string]any {
	t.Helper()
	return e.do(t, "POST", "/retry-tasks", body).wantStatus(t, http.StatusCreated)
}
