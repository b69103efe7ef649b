package main_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	s3blob "github.com/retrykit/retry/service/blob/s3"
	"github.com/retrykit/retry/service/blob/s3/s3test"
	"github.com/retrykit/retry/service/store/redis/redistest"
)

// s3Place is a prefix of a test's own in the S3 test server's bucket.
type s3Place struct {
	spec  string        // the --blobs value
	env   []string      // AWS_* for retryd
	store *s3blob.Store // on the same prefix, for the test's checks
	cfg   s3blob.Config // of store
}

// newS3Place returns a fresh prefix on the S3 test server (s3test), whose
// objects are deleted when t ends.
func newS3Place(t *testing.T) s3Place {
	t.Helper()
	cfg := s3test.Config(t, "retryd-test")
	st, err := s3blob.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	q := url.Values{"region": {cfg.Region}}
	if cfg.Endpoint != "" {
		q.Set("endpoint", cfg.Endpoint)
	}
	p := s3Place{
		spec:  "s3://" + cfg.Bucket + "/" + cfg.Prefix + "?" + q.Encode(),
		env:   []string{"AWS_ACCESS_KEY_ID=" + cfg.AccessKeyID, "AWS_SECRET_ACCESS_KEY=" + cfg.SecretAccessKey},
		store: st,
		cfg:   cfg,
	}
	if cfg.SessionToken != "" {
		p.env = append(p.env, "AWS_SESSION_TOKEN="+cfg.SessionToken)
	}
	return p
}

// randomText returns n random bytes as lowercase hex (so that they go
// into JSON as they are).
func randomText(n int) string {
	b := make([]byte, (n+1)/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}

// A 20 MB body goes to S3 beside a PostgreSQL or Redis store, and each of
// its two attempts sends all of it, byte for byte, from there.
func TestLargeBodyThroughS3(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"postgres", "redis"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var b backend
			if name == "postgres" {
				b = postgresBackend(t)
			} else {
				b = redisBackend(t, redistest.URL(t))
			}
			place := newS3Place(t)
			target, seen := hashingTarget(t)
			start := time.Now()
			d := startDaemonEnv(t, place.env, b.store, append([]string{"--blobs", place.spec, "--allow-private-targets"}, b.flags...)...)
			d.putPolicy("quick", quick)
			body := randomText(20_000_000)
			want := sha256.Sum256([]byte(body))
			var created struct{ TaskID string }
			d.call("POST", "/retry-tasks", map[string]any{"targetUrl": target, "policyId": "quick", "body": body}, http.StatusCreated, &created)

			var got map[string]any
			d.call("GET", "/retry-tasks/"+created.TaskID, nil, http.StatusOK, &got)
			ref, _ := got["bodyRef"].(string)
			if ref != place.store.Ref(want) || got["bodySize"] != float64(len(body)) || got["body"] != nil {
				t.Fatalf("GET: bodyRef %v (want %s) bodySize %v body present %t",
					got["bodyRef"], place.store.Ref(want), got["bodySize"], got["body"] != nil)
			}
			r, size, err := place.store.Open(context.Background(), ref)
			if err != nil {
				t.Fatalf("the blob in the bucket: %v", err)
			}
			h := sha256.New()
			n, err := io.Copy(h, r)
			r.Close()
			if err != nil || n != int64(len(body)) || size != n || [32]byte(h.Sum(nil)) != want {
				t.Fatalf("the blob in the bucket: %d bytes (size %d), %v, sha256 %x; want the %d bytes given",
					n, size, err, h.Sum(nil)[:6], len(body))
			}

			if got := d.waitTask(created.TaskID, terminal); got.Status != "SUCCEEDED" || got.AttemptNumber != 2 {
				t.Fatalf("task %+v, want SUCCEEDED after 2 attempts", got)
			}
			sent := seen()
			if len(sent) != 2 {
				t.Fatalf("target saw %d requests, want 2", len(sent))
			}
			for i, g := range sent {
				if g.length != int64(len(body)) || g.n != int64(len(body)) || g.sum != want {
					t.Errorf("attempt %d: target got Content-Length %d, %d bytes, sha256 %x; want the %d bytes given",
						i+1, g.length, g.n, g.sum[:6], len(body))
				}
			}
			t.Logf("%s+S3: 20 MB body created and sent twice in %v", name, time.Since(start).Round(time.Millisecond))
		})
	}
}

// A blob deleted from S3 behind retryd's back: the attempts fail, saying
// so, and the task is exhausted by its policy; nothing reaches the target.
func TestDeletedS3BlobExhaustsTheTask(t *testing.T) {
	t.Parallel()
	b := redisBackend(t, redistest.URL(t))
	place := newS3Place(t)
	target, seen := hashingTarget(t)
	d := startDaemonEnv(t, place.env, b.store, append([]string{"--blobs", place.spec, "--allow-private-targets"}, b.flags...)...)
	d.putPolicy("p", map[string]any{"backoff": "FIXED", "initialDelayMs": 20, "jitterType": "NONE", "maxAttempts": 3})
	body := randomText(1 << 20)
	var created struct {
		task
		BodyRef string `json:"bodyRef"`
	}
	d.call("POST", "/retry-tasks", map[string]any{"targetUrl": target, "policyId": "p", "body": body,
		"notBefore": time.Now().Add(time.Second).UnixMilli()}, http.StatusCreated, &created)
	if created.BodyRef != place.store.Ref(sha256.Sum256([]byte(body))) {
		t.Fatalf("bodyRef %q: the body was not put in the bucket", created.BodyRef)
	}
	if err := place.store.Delete(context.Background(), created.BodyRef); err != nil {
		t.Fatal(err)
	}
	got := d.waitTask(created.TaskID, terminal)
	want := "body: blob not found: " + created.BodyRef
	if got.Status != "EXHAUSTED" || got.AttemptNumber != 3 || !strings.HasPrefix(got.LastError, want) {
		t.Fatalf("task %+v, want EXHAUSTED after 3 attempts, lastError %q", got, want)
	}
	for _, a := range d.attempts(created.TaskID) {
		if a.ErrorMessage != want {
			t.Errorf("attempt %+v, want error %q", a, want)
		}
	}
	if n := len(seen()); n != 0 {
		t.Errorf("target saw %d requests, want none", n)
	}
}
