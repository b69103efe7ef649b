package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Instances sharing a PostgreSQL or Redis store must share their blobs: an
// embedded blob store there is refused at startup, saying what to give
// instead, unless written local:DIR; and so are large-body flags without a
// blob store. (The store is not reached: the flags are checked first.)
func TestSharedStoreRefusesEmbeddedBlobs(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "blobs")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--store", "postgres://retryd@127.0.0.1:1/retryd", "--blobs", dir},
			[]string{"must share their blobs", "--blobs s3://bucket/prefix", "--blobs local:" + dir}},
		{[]string{"--store", "redis://127.0.0.1:1/0", "--blobs", dir},
			[]string{"must share their blobs", "redis"}},
		{[]string{"--store", "postgres://retryd@127.0.0.1:1/retryd", "--max-body", "16MiB"},
			[]string{"--max-body: need a blob store", "s3://"}},
	} {
		cmd := exec.Command(binary, append(tc.args, "--listen", "127.0.0.1:0")...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		out, err := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); err == nil || code != 2 {
			t.Fatalf("%v: exit code %d (%v), want 2:\n%s", tc.args, code, err, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("%v: the output does not say %q:\n%s", tc.args, w, out)
			}
		}
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("a refused start made the blob store %s", dir)
	}
}

// retryd on its embedded database keeps a large body in the embedded blob
// store beside it, and the task holds its reference.
func TestLargeBodyBesideTheDatabase(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	d := startDaemon(t, db)
	defer d.stop()
	d.putPolicy("p", map[string]any{"maxAttempts": 1})
	body := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	var created map[string]any
	d.call("POST", "/retry-tasks", map[string]any{"targetUrl": "http://127.0.0.1:9/", "policyId": "p", "body": body,
		"notBefore": time.Now().Add(24 * time.Hour).UnixMilli()}, 201, &created)
	ref, _ := created["bodyRef"].(string)
	if !strings.HasPrefix(ref, "blob:sha256:") || created["bodySize"] != float64(len(body)) || created["body"] != nil {
		t.Fatalf("created: bodyRef %v bodySize %v body present %t", created["bodyRef"], created["bodySize"], created["body"] != nil)
	}
	h := strings.TrimPrefix(ref, "blob:sha256:")
	b, err := os.ReadFile(filepath.Join(strings.TrimSuffix(db, ".db")+".blobs", "sha256", h[:2], h))
	if err != nil || string(b) != body {
		t.Fatalf("the blob beside %s: %d bytes, %v", db, len(b), err)
	}
	if !contains(d.log(), `"blobs":"`+strings.TrimSuffix(db, ".db")+`.blobs"`) {
		t.Errorf("the startup log does not say where the blobs are:\n%s", d.log())
	}
}
