package s3_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/retrykit/retry/service/blob"
	"github.com/retrykit/retry/service/blob/blobtest"
	"github.com/retrykit/retry/service/blob/s3"
	"github.com/retrykit/retry/service/blob/s3/s3test"
)

// newStore returns a store on the test server (s3test) under a prefix of
// t's own, whose objects and unfinished uploads are deleted when t ends, and
// its s3.Config. Its uploads above 8 MiB are multipart, in parts of 5 MiB, so
// that the suite's 20 MB bodies take that way.
func newStore(t testing.TB) (*s3.Store, s3.Config) {
	t.Helper()
	cfg := s3test.Config(t, "retrykit-test")
	s, err := s3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	s3.SetPartSizes(s, 8<<20, 5<<20)
	return s, cfg
}

func TestConformance(t *testing.T) {
	s3test.Config(t, "retrykit-test") // skips (or fails) once, not in every test
	blobtest.Run(t, func(t *testing.T) blob.Store { s, _ := newStore(t); return s })
}

// putObject puts data at key as a caller would, without the store.
func putObject(t *testing.T, cfg s3.Config, key string, data []byte) {
	t.Helper()
	_, err := s3test.Client(cfg).PutObject(context.Background(), &awss3.PutObjectInput{
		Bucket: &cfg.Bucket, Key: &key, Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
	})
	if err != nil {
		t.Fatal(err)
	}
}

func readAll(s *s3.Store, ref string) ([]byte, int64, error) {
	r, size, err := s.Open(context.Background(), ref)
	if err != nil {
		return nil, 0, err
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	return data, size, err
}

// TestCallerOwned: an object the store did not put is read as it is, is not
// listed, and is never deleted.
func TestCallerOwned(t *testing.T) {
	ctx := context.Background()
	s, cfg := newStore(t)
	mine, err := s.Put(ctx, strings.NewReader("mine"))
	if err != nil {
		t.Fatal(err)
	}
	// A caller's object beside the store's blobs, and one named like a blob
	// of another prefix, whose bytes do not match its name.
	h := sha256.Sum256([]byte("something else"))
	keys := []string{cfg.Prefix + "/callers/payload.json", cfg.Prefix + "/other/sha256/" + hex.EncodeToString(h[:])}
	for _, key := range keys {
		payload := []byte(`{"caller":"` + key + `"}`)
		putObject(t, cfg, key, payload)
		ref := "s3://" + cfg.Bucket + "/" + key
		if s.Owns(ref) {
			t.Errorf("Owns(%s) = true", ref)
		}
		data, size, err := readAll(s, ref)
		if err != nil || !bytes.Equal(data, payload) || size != int64(len(payload)) {
			t.Errorf("s3.Open(%s) reads %q (size %d), %v; want %q", ref, data, size, err, payload)
		}
		if err := s.Delete(ctx, ref); !errors.Is(err, blob.ErrNotOwned) {
			t.Errorf("Delete(%s) = %v, want ErrNotOwned", ref, err)
		}
		if data, _, err := readAll(s, ref); err != nil || !bytes.Equal(data, payload) {
			t.Errorf("after Delete, %s reads %q, %v", ref, data, err)
		}
	}
	var refs []string
	if err := s.List(ctx, func(in blob.Info) error { refs = append(refs, in.Ref); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(refs) != 1 || refs[0] != mine.Ref {
		t.Errorf("List = %v, want only %s", refs, mine.Ref)
	}
	for _, ref := range []string{
		"s3://" + cfg.Bucket + "/" + cfg.Prefix + "/callers/missing.json",
		"s3://retrykit-test-no-such-bucket/key",
	} {
		if _, _, err := s.Open(ctx, ref); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("s3.Open(%s) = %v, want ErrNotFound", ref, err)
		}
	}
}

// TestRefForm: s3://<bucket>/<prefix>/sha256/<hex>, and sha256/<hex> at the
// top of a bucket without a prefix.
func TestRefForm(t *testing.T) {
	s, cfg := newStore(t)
	b, err := s.Put(context.Background(), strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	const sum = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
	if want := "s3://" + cfg.Bucket + "/" + cfg.Prefix + "/sha256/" + sum; b.Ref != want {
		t.Errorf("Ref = %s, want %s", b.Ref, want)
	}
	top, err := s3.New(s3.Config{Bucket: "b-1", Region: "r", AccessKeyID: "a", SecretAccessKey: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if ref := top.Ref(b.SHA256); ref != "s3://b-1/sha256/"+sum || !top.Owns(ref) {
		t.Errorf("without a prefix, Ref = %s (Owns %v), want s3://b-1/sha256/%s", ref, top.Owns(ref), sum)
	}
}

// TestSignedPayload: the upload is signed with the SHA-256 Put computed, and
// the server refuses bytes that do not match it.
func TestSignedPayload(t *testing.T) {
	s, cfg := newStore(t)
	f, err := os.CreateTemp(t.TempDir(), "body")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("the body"); err != nil {
		t.Fatal(err)
	}
	wrong := sha256.Sum256([]byte("another body"))
	if err := s3.PutSingle(context.Background(), s, cfg.Prefix+"/sha256/"+"x", f, 8, hex.EncodeToString(wrong[:])); err == nil {
		t.Errorf("a PUT signed with another body's SHA-256 succeeded")
	}
	right := sha256.Sum256([]byte("the body"))
	if err := s3.PutSingle(context.Background(), s, cfg.Prefix+"/sha256/"+"x", f, 8, hex.EncodeToString(right[:])); err != nil {
		t.Errorf("a PUT signed with its SHA-256 = %v", err)
	}
}

// TestCorrupt: a blob whose object was replaced fails to read, before its end.
func TestCorrupt(t *testing.T) {
	s, cfg := newStore(t)
	body := bytes.Repeat([]byte("0123456789"), 100_000)
	b, err := s.Put(context.Background(), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	body[500_000] = 'x'
	putObject(t, cfg, strings.TrimPrefix(b.Ref, "s3://"+cfg.Bucket+"/"), body)
	data, _, err := readAll(s, b.Ref)
	if !errors.Is(err, blob.ErrCorrupt) || len(data) >= len(body) {
		t.Errorf("reading a replaced blob = %d bytes, %v; want fewer than %d, ErrCorrupt", len(data), err, len(body))
	}
}

// TestMultipartAborted: a multipart upload that fails is aborted, leaving no
// object and no parts.
func TestMultipartAborted(t *testing.T) {
	s, cfg := newStore(t)
	s3.SetPartSizes(s, 1<<20, 1<<20) // parts below S3's 5 MiB: completing fails
	_, err := s.Put(context.Background(), bytes.NewReader(make([]byte, 3<<20)))
	if err == nil {
		t.Skip("the server completed an upload of 1 MiB parts: it does not enforce S3's minimum part size")
	}
	if us := s3test.Uploads(t, cfg); len(us) != 0 {
		t.Errorf("%d multipart uploads left behind, want none", len(us))
	}
	n := 0
	if err := s.List(context.Background(), func(blob.Info) error { n++; return nil }); err != nil || n != 0 {
		t.Errorf("List = %d blobs, %v; want none", n, err)
	}
}

// TestOpenURL: Open checks the bucket.
func TestOpenURL(t *testing.T) {
	cfg := s3test.Config(t, "retrykit-test")
	if _, custom := os.LookupEnv("RETRYKIT_S3"); !custom {
		t.Setenv("AWS_ACCESS_KEY_ID", s3test.DefaultAccessKey)
		t.Setenv("AWS_SECRET_ACCESS_KEY", s3test.DefaultSecretKey)
		t.Setenv("AWS_SESSION_TOKEN", "")
	}
	spec := os.Getenv("RETRYKIT_S3")
	if spec == "" {
		spec = s3test.DefaultURL
	}
	s, err := s3.Open(context.Background(), spec)
	if err != nil {
		t.Fatalf("s3.Open(%s) = %v", spec, err)
	}
	s.Close()
	missing := strings.Replace(spec, cfg.Bucket, "retrykit-test-no-such-bucket", 1)
	if _, err := s3.Open(context.Background(), missing); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("s3.Open(%s) = %v, want ErrNotFound", missing, err)
	}
}

func TestParseURL(t *testing.T) {
	for _, k := range []string{"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "AKID")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "SECRET")
	creds := func(c s3.Config) s3.Config { c.AccessKeyID, c.SecretAccessKey = "AKID", "SECRET"; return c }
	for _, tt := range []struct {
		spec string
		env  map[string]string
		want s3.Config
	}{
		{spec: "s3://bucket/some/prefix/?endpoint=http://127.0.0.1:7070&region=eu-west-3",
			want: s3.Config{Bucket: "bucket", Prefix: "some/prefix", Endpoint: "http://127.0.0.1:7070", Region: "eu-west-3", PathStyle: true}},
		{spec: "s3://bucket?endpoint=https://minio.example:9000",
			want: s3.Config{Bucket: "bucket", Endpoint: "https://minio.example:9000", Region: "us-east-1", PathStyle: true}},
		{spec: "s3://my.bucket/p?region=us-west-2&tmpdir=/var/tmp",
			want: s3.Config{Bucket: "my.bucket", Prefix: "p", Region: "us-west-2", TempDir: "/var/tmp"}},
		{spec: "s3://bucket/p", env: map[string]string{"AWS_REGION": "ap-south-1", "AWS_DEFAULT_REGION": "x"},
			want: s3.Config{Bucket: "bucket", Prefix: "p", Region: "ap-south-1"}},
		{spec: "s3://bucket/p", env: map[string]string{"AWS_DEFAULT_REGION": "ap-south-2"},
			want: s3.Config{Bucket: "bucket", Prefix: "p", Region: "ap-south-2"}},
		{spec: "s3://bucket", env: map[string]string{"AWS_ENDPOINT_URL": "http://ceph:80", "AWS_SESSION_TOKEN": "TOKEN"},
			want: s3.Config{Bucket: "bucket", Endpoint: "http://ceph:80", Region: "us-east-1", PathStyle: true, SessionToken: "TOKEN"}},
		{spec: "s3://bucket?endpoint=http://a:1", env: map[string]string{"AWS_ENDPOINT_URL_S3": "http://b:2"},
			want: s3.Config{Bucket: "bucket", Endpoint: "http://a:1", Region: "us-east-1", PathStyle: true}},
	} {
		t.Run(tt.spec, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			got, err := s3.ParseURL(tt.spec)
			if want := creds(tt.want); err != nil || got != want {
				t.Errorf("s3.ParseURL(%s) = %+v, %v; want %+v", tt.spec, got, err, want)
			}
		})
	}
	for _, spec := range []string{
		"", "bucket", "http://bucket/p", "s3:bucket", "s3://", "s3:///p", "s3://b/p?region=r", "s3://bucket:9000/p?region=r",
		"s3://bu cket?region=r", "s3://user:pass@bucket?region=r", "s3://bucket/p?region=r&bogus=1",
		"s3://bucket/p?region=r&region=s", "s3://bucket/p#x?region=r", "s3://bucket/a//b?region=r",
		"s3://bucket?endpoint=127.0.0.1:7070", "s3://bucket?endpoint=ftp://h", "s3://bucket/p",
	} {
		if got, err := s3.ParseURL(spec); err == nil {
			t.Errorf("s3.ParseURL(%q) = %+v, want an error", spec, got)
		} else if strings.Contains(err.Error(), "pass") {
			t.Errorf("s3.ParseURL(%q) = %v, which shows the password", spec, err)
		}
	}
}

func TestNewErrors(t *testing.T) {
	ok := s3.Config{Bucket: "bucket", Region: "r", AccessKeyID: "a", SecretAccessKey: "s"}
	for what, c := range map[string]s3.Config{
		"no bucket":     {Region: "r", AccessKeyID: "a", SecretAccessKey: "s"},
		"no region":     {Bucket: "bucket", AccessKeyID: "a", SecretAccessKey: "s"},
		"no key":        {Bucket: "bucket", Region: "r", SecretAccessKey: "s"},
		"no secret":     {Bucket: "bucket", Region: "r", AccessKeyID: "a"},
		"no tmpdir":     {Bucket: "bucket", Region: "r", AccessKeyID: "a", SecretAccessKey: "s", TempDir: "/no/such/dir"},
		"tmpdir a file": {Bucket: "bucket", Region: "r", AccessKeyID: "a", SecretAccessKey: "s", TempDir: "/etc/hostname"},
	} {
		if _, err := s3.New(c); err == nil {
			t.Errorf("s3.New(%s) = nil error", what)
		}
	}
	if _, err := s3.New(ok); err != nil {
		t.Errorf("s3.New(%+v) = %v", ok, err)
	}
}

// TestMultipart: a body above the single PUT's limit goes up in parts.
func TestMultipart(t *testing.T) {
	s, cfg := newStore(t) // parts of 5 MiB above 8 MiB
	body := make([]byte, 12<<20)
	_, _ = rand.Read(body)
	b, err := s.Put(context.Background(), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimPrefix(b.Ref, "s3://"+cfg.Bucket+"/")
	head, err := s3test.Client(cfg).HeadObject(context.Background(), &awss3.HeadObjectInput{Bucket: &cfg.Bucket, Key: &key})
	if err != nil {
		t.Fatal(err)
	}
	if etag := aws.ToString(head.ETag); !strings.HasSuffix(strings.Trim(etag, `"`), "-3") {
		t.Errorf("ETag = %s, want that of a multipart upload of 3 parts (…-3)", etag)
	}
	if data, _, err := readAll(s, b.Ref); err != nil || !bytes.Equal(data, body) {
		t.Errorf("reading it back = %d bytes, %v", len(data), err)
	}
}
