package run_test

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retrykit/retry/service/blob/s3/s3test"
)

func TestBlobFlags(t *testing.T) {
	t.Parallel()
	c, err := parseArgs(t, []string{"--blobs", "local:/var/lib/retryd/blobs", "--blob-threshold", "32KiB", "--max-body", "128m",
		"--allow-body-refs", "s3://in/a/, s3://in/b/", "--allow-body-refs", "s3://other/"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Blobs != "local:/var/lib/retryd/blobs" || c.BlobThreshold != 32<<10 || c.MaxBody != 128<<20 ||
		strings.Join(c.AllowBodyRefs, " ") != "s3://in/a/ s3://in/b/ s3://other/" {
		t.Fatalf("got %+v", c.BlobConfig)
	}
	c, err = parseArgs(t, nil, map[string]string{"RETRYD_BLOBS": "off", "RETRYD_BLOB_THRESHOLD": "1000", "RETRYD_MAX_BODY": "2GiB"})
	if err != nil || c.Blobs != "off" || c.BlobThreshold != 1000 || c.MaxBody != 2<<30 {
		t.Fatalf("from the environment: %+v, %v", c.BlobConfig, err)
	}
	for _, bad := range []string{"0", "-1", "1.5MiB", "64KB", "MiB", "x", "2000000GiB"} {
		if _, err := parseArgs(t, []string{"--blob-threshold", bad}, nil); err == nil {
			t.Errorf("--blob-threshold %q accepted", bad)
		}
	}
}

// What --blobs allows, per store: retryd refuses to start (exit 2) rather
// than run instances of a shared store on blob stores of their own, or take
// flags that would do nothing.
func TestBlobsRules(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "r.db")
	tokens := writeFile(t, "tokens", "token-of-acme-0123456789 acme s3://in-bucket/acme/\n")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"a directory on postgres", []string{"--store", "postgres://u:hunter2@127.0.0.1:1/x", "--blobs", filepath.Join(dir, "b")}, "must share their blobs"},
		{"a directory on redis", []string{"--store", "redis://127.0.0.1:1/0", "--blobs", "./blobs"}, "--blobs local:./blobs"},
		{"a size without a blob store on postgres", []string{"--store", "postgres://127.0.0.1:1/x", "--max-body", "8MiB"}, "--max-body: need a blob store"},
		{"a threshold with blobs off", []string{"--store", db, "--blobs", "off", "--blob-threshold", "1KiB"}, "--blob-threshold: need a blob store"},
		{"a threshold over 1MiB", []string{"--store", db, "--blob-threshold", "2MiB"}, "at most 1MiB"},
		{"an unknown kind", []string{"--store", db, "--blobs", "gs://bucket/x"}, "unknown kind"},
		{"allow-body-refs with tokens", []string{"--store", db, "--tokens-file", tokens, "--allow-body-refs", "s3://in-bucket/x/"}, "list each tenant's"},
		{"allow-body-refs on the embedded store", []string{"--store", db, "--allow-body-refs", "s3://in-bucket/x/"}, "needs --blobs s3://"},
		{"allow-body-refs without its slash", []string{"--store", db, "--blobs", "s3://b-bucket?region=x", "--allow-body-refs", "s3://in-bucket/x"}, "must end with '/'"},
		{"tenants' prefixes on the embedded store", []string{"--store", db, "--tokens-file", tokens}, "need --blobs s3://"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := runMain(append(tt.args, "--listen", "127.0.0.1:0")...)
			all := out + errOut
			if code != 2 || !strings.Contains(all, tt.want) {
				t.Errorf("exit %d, want 2 saying %q; output %q", code, tt.want, all)
			}
			if strings.Contains(all, "hunter2") {
				t.Errorf("output %q shows the password", all)
			}
		})
	}
}

// By default, an SQLite store gets the embedded blob store beside it, and a
// large body goes there; --blobs local:DIR and --blobs off too.
func TestServeBlobs(t *testing.T) {
	t.Parallel()
	body := strings.Repeat("x", 100<<10)
	create := func(t *testing.T, s *served) map[string]any {
		t.Helper()
		if status, _, b := do(t, "POST", s.url+"/retry-policies", "", map[string]any{"policyId": "p"}); status != 201 {
			t.Fatalf("policy: %d %s", status, b)
		}
		status, _, b := do(t, "POST", s.url+"/retry-tasks", "", map[string]any{"targetUrl": "http://h/", "policyId": "p", "body": body})
		var m map[string]any
		if status != 201 || json.Unmarshal([]byte(b), &m) != nil {
			t.Fatalf("create: %d %s", status, b)
		}
		return m
	}
	blobFile := func(dir, ref string) string {
		h := strings.TrimPrefix(ref, "blob:sha256:")
		return filepath.Join(dir, "sha256", h[:2], h)
	}

	t.Run("default", func(t *testing.T) {
		t.Parallel()
		db := filepath.Join(t.TempDir(), "r.db")
		s := serve(t, "--store", db)
		ref, _ := create(t, s)["bodyRef"].(string)
		if fi, err := os.Stat(blobFile(strings.TrimSuffix(db, ".db")+".blobs", ref)); err != nil || fi.Size() != int64(len(body)) {
			t.Fatalf("bodyRef %q: no blob of %d bytes beside the database (%v)", ref, len(body), err)
		}
	})
	t.Run("local:DIR", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "elsewhere")
		s := serve(t, "--blobs", "local:"+dir, "--blob-threshold", "200KiB")
		if m := create(t, s); m["bodyRef"] != nil || m["body"] != body {
			t.Fatalf("a body under --blob-threshold went by reference: %v", m["bodyRef"])
		}
		if _, err := os.Stat(filepath.Join(dir, "sha256")); err != nil {
			t.Fatalf("no blob store in %s: %v", dir, err)
		}
	})
	t.Run("off", func(t *testing.T) {
		t.Parallel()
		s := serve(t, "--blobs", "off")
		if m := create(t, s); m["bodyRef"] != nil || m["body"] != body {
			t.Fatalf("--blobs off: bodyRef %v", m["bodyRef"])
		}
		big := map[string]any{"targetUrl": "http://h/", "policyId": "p", "body": strings.Repeat("y", 2<<20)}
		if status, _, _ := do(t, "POST", s.url+"/retry-tasks", "", big); status != 413 {
			t.Fatalf("--blobs off: a 2 MiB body answered %d, want 413", status)
		}
	})
}

// s3Spec is the S3 test server's blob store under a prefix of its own,
// with its bucket in place (s3test), and its credentials in the AWS_*
// environment as retryd reads them.
func s3Spec(t *testing.T) string {
	cfg := s3test.Config(t, "retryd-run")
	t.Setenv("AWS_ACCESS_KEY_ID", cfg.AccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", cfg.SecretAccessKey)
	t.Setenv("AWS_SESSION_TOKEN", cfg.SessionToken)
	q := url.Values{"region": {cfg.Region}}
	if cfg.Endpoint != "" {
		q.Set("endpoint", cfg.Endpoint)
	}
	return "s3://" + cfg.Bucket + "/" + cfg.Prefix + "?" + q.Encode()
}

// --blobs s3://… keeps large bodies in S3, and lets --allow-body-refs name
// callers' objects, never retryd's own.
func TestServeS3Blobs(t *testing.T) {
	spec := s3Spec(t) // sets the AWS_* environment: not parallel
	bucket := strings.SplitN(strings.TrimPrefix(spec, "s3://"), "/", 2)[0]
	s := serve(t, "--blobs", spec, "--allow-body-refs", "s3://"+bucket+"/callers/")
	if status, _, b := do(t, "POST", s.url+"/retry-policies", "", map[string]any{"policyId": "p"}); status != 201 {
		t.Fatalf("policy: %d %s", status, b)
	}
	status, _, b := do(t, "POST", s.url+"/retry-tasks", "", map[string]any{"targetUrl": "http://h/", "policyId": "p", "body": strings.Repeat("z", 70<<10)})
	var m map[string]any
	json.Unmarshal([]byte(b), &m)
	prefix := strings.SplitN(strings.TrimPrefix(spec, "s3://"), "?", 2)[0]
	ref, _ := m["bodyRef"].(string)
	if status != 201 || !strings.HasPrefix(ref, "s3://"+prefix+"/sha256/") || m["bodySize"] != float64(70<<10) {
		t.Fatalf("create: %d %s", status, b)
	}
	for ref, want := range map[string]int{
		"s3://" + bucket + "/callers/order-1.json": 201,
		"s3://" + bucket + "/other/order-1.json":   400,
		ref:                                        400, // retryd's own
	} {
		if status, _, b := do(t, "POST", s.url+"/retry-tasks", "", map[string]any{"targetUrl": "http://h/", "policyId": "p", "bodyRef": ref}); status != want {
			t.Errorf("bodyRef %s: %d %s, want %d", ref, status, b, want)
		}
	}
}
