package dispatch_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/service/blob"
	"github.com/retrykit/retry/service/blob/s3"
	"github.com/retrykit/retry/service/blob/s3/s3test"
	"github.com/retrykit/retry/service/dispatch"
)

// s3Test is an S3 blob store under a prefix of the test's own, and a client
// to put objects as a caller would; both are cleaned up when the test ends.
type s3Test struct {
	*s3.Store
	cfg    s3.Config
	client *awss3.Client
}

// newS3 returns an s3Test, or skips t when no S3 server answers (fails under
// RETRYKIT_REQUIRE_SERVERS=1).
func newS3(t *testing.T) *s3Test {
	t.Helper()
	cfg := s3test.Config(t, "retrykit-dispatch-test")
	st := &s3Test{cfg: cfg, client: s3test.Client(cfg)}
	var err error
	if st.Store, err = s3.New(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// putObject puts data under the test's prefix as a caller would, and
// returns its reference.
func (st *s3Test) putObject(t *testing.T, name string, data []byte) string {
	t.Helper()
	key := st.cfg.Prefix + "/caller/" + name
	_, err := st.client.PutObject(context.Background(), &awss3.PutObjectInput{
		Bucket: &st.cfg.Bucket, Key: &key, Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
	})
	if err != nil {
		t.Fatal(err)
	}
	return "s3://" + st.cfg.Bucket + "/" + key
}

// A 20 MB blob of the S3 store reaches the target whole at every attempt.
func TestBodyRefS3DeliveredOnEveryAttempt(t *testing.T) {
	t.Parallel()
	st := newS3(t)
	checkSameBodyEveryAttempt(t, st, putBody(t, st, 11, bigBody))
}

// Attempts streaming bodies from S3 at once hold a few buffers each.
func TestBodyRefS3MemoryBounded(t *testing.T) {
	n := 16
	if testing.Short() {
		n = 8
	}
	checkMemoryBounded(t, newS3(t), n)
}

// A caller's own object is sent as it is at each attempt: changed since
// the task was made, its new bytes and length go out; gone, the attempt
// fails with a clear error and is retried.
func TestBodyRefS3CallersObject(t *testing.T) {
	t.Parallel()
	st := newS3(t)
	first := bytes.Repeat([]byte("caller's body "), 100_000) // 1.4 MB
	ref := st.putObject(t, "order.json", first)
	tg := newHashTarget(t, 200)
	d := bodyDispatcher(t, st)
	req := dispatch.Request{Method: "PUT", URL: tg.URL, BodyRef: ref}
	if res := d.Send(context.Background(), req); res.Err != nil || res.Status != 200 {
		t.Fatalf("first Send = %d, %v", res.Status, res.Err)
	}
	second := []byte("shorter now")
	st.putObject(t, "order.json", second)
	if res := d.Send(context.Background(), req); res.Err != nil || res.Status != 200 {
		t.Fatalf("second Send = %d, %v", res.Status, res.Err)
	}
	for i, want := range [][]byte{first, second} {
		g := tg.seen()[i]
		if g.err != nil || g.length != int64(len(want)) || g.n != int64(len(want)) || g.sum != sha256.Sum256(want) {
			t.Errorf("attempt %d: target got Content-Length %d, %d bytes (err %v), not the object's %d bytes",
				i+1, g.length, g.n, g.err, len(want))
		}
	}

	key := strings.TrimPrefix(ref, "s3://"+st.cfg.Bucket+"/")
	if _, err := st.client.DeleteObject(context.Background(), &awss3.DeleteObjectInput{Bucket: &st.cfg.Bucket, Key: &key}); err != nil {
		t.Fatal(err)
	}
	res := d.Send(context.Background(), req)
	if !errors.Is(res.Err, blob.ErrNotFound) || res.Outcome(&retry.Policy{}) != dispatch.Retry {
		t.Fatalf("Send of a deleted object = %d, %v; want blob.ErrNotFound, retried", res.Status, res.Err)
	}
	if msg, want := res.Message(), "body: blob not found: "+ref; msg != want {
		t.Errorf("Message = %q, want %q", msg, want)
	}
	if n := len(tg.seen()); n != 2 {
		t.Errorf("target saw %d requests, want 2", n)
	}
}

// An object in a bucket that does not exist, or that the credentials
// cannot read: the store's error, retried.
func TestBodyRefS3NoBucket(t *testing.T) {
	t.Parallel()
	st := newS3(t)
	tg := newHashTarget(t, 200)
	d := bodyDispatcher(t, st)
	ref := "s3://retrykit-no-such-bucket-" + strings.ToLower(hex.EncodeToString([]byte(t.Name()))[:8]) + "/x"
	res := d.Send(context.Background(), dispatch.Request{Method: "POST", URL: tg.URL, BodyRef: ref})
	if res.Err == nil || !strings.HasPrefix(res.Message(), "body") || res.Outcome(&retry.Policy{}) != dispatch.Retry {
		t.Fatalf("Send = %d, %v; want the body's error, retried", res.Status, res.Err)
	}
	t.Logf("%s", res.Message())
}
