package s3

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/retrykit/retry/service/blob"
	"github.com/retrykit/retry/service/blob/blobtest"
)

// The test server: versitygw on 127.0.0.1:7070 with these credentials, as
// .ci/servers starts it, unless RETRYKIT_S3 names another store, whose
// credentials then come from the AWS_* environment variables as retryd's do.
const (
	defaultURL       = "s3://retrykit-test?endpoint=http://127.0.0.1:7070&region=us-east-1"
	defaultAccessKey = "retrykit"
	defaultSecretKey = "retrykit-secret"
)

// serverConfig returns the Config of the test server, whose bucket it
// creates when missing. Without an answer from the server, t is skipped,
// or fails when RETRYKIT_REQUIRE_SERVERS=1.
func serverConfig(t testing.TB) Config {
	t.Helper()
	spec, custom := os.LookupEnv("RETRYKIT_S3")
	if !custom {
		spec = defaultURL
	}
	cfg, err := ParseURL(spec)
	if err != nil {
		t.Fatalf("RETRYKIT_S3: %v", err)
	}
	if !custom {
		cfg.AccessKeyID, cfg.SecretAccessKey, cfg.SessionToken = defaultAccessKey, defaultSecretKey, ""
	}
	server.Lock()
	defer server.Unlock()
	if !server.checked {
		server.missing = checkServer(t, spec, cfg)
		server.checked = true
	}
	if server.missing != "" {
		if os.Getenv("RETRYKIT_REQUIRE_SERVERS") == "1" {
			t.Fatal(server.missing + " (RETRYKIT_REQUIRE_SERVERS=1)")
		}
		t.Skip(server.missing)
	}
	return cfg
}

var server struct {
	sync.Mutex
	checked bool
	missing string // why there is no server to test with
}

// checkServer asks the server for the bucket, creating it when it is
// missing, and returns why there is no server if there is none.
func checkServer(t testing.TB, spec string, cfg Config) string {
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = s.Check(ctx)
	if errors.Is(err, blob.ErrNotFound) {
		_, err = s.client.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: &cfg.Bucket})
		var owned *types.BucketAlreadyOwnedByYou
		if errors.As(err, &owned) {
			err = nil
		}
	}
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) { // the server answered
			t.Fatalf("S3 test server %s: %v", spec, err)
		}
		return fmt.Sprintf("no S3 server answers at %s (%v): start versitygw with .ci/servers, "+
			"or point RETRYKIT_S3 at a store (credentials in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)", spec, err)
	}
	return ""
}

// newStore returns a store on the test server under a prefix of t's own,
// whose objects (and unfinished uploads) are deleted when t ends. Its
// uploads above 8 MiB are multipart, in parts of 5 MiB, so that the suite's
// 20 MB bodies take that way.
func newStore(t testing.TB) *Store {
	t.Helper()
	cfg := serverConfig(t)
	var r [6]byte
	_, _ = rand.Read(r[:])
	cfg.Prefix = strings.Trim(cfg.Prefix+"/retrykit-test-"+hex.EncodeToString(r[:]), "/")
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.maxSinglePut, s.partSize = 8<<20, 5<<20
	t.Cleanup(func() { clean(t, cfg) })
	return s
}

// clean deletes every object and unfinished upload under cfg.Prefix.
func clean(t testing.TB, cfg Config) {
	s, err := New(cfg)
	if err != nil {
		t.Error(err)
		return
	}
	defer s.Close()
	ctx := context.Background()
	prefix := cfg.Prefix + "/"
	p := awss3.NewListObjectsV2Paginator(s.client, &awss3.ListObjectsV2Input{Bucket: &cfg.Bucket, Prefix: &prefix})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Errorf("cleaning %s: %v", prefix, err)
			return
		}
		for _, o := range page.Contents {
			if _, err := s.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &cfg.Bucket, Key: o.Key}); err != nil {
				t.Errorf("cleaning %s: %v", *o.Key, err)
			}
		}
	}
	for _, u := range uploads(t, s, prefix) {
		_, _ = s.client.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{Bucket: &cfg.Bucket, Key: u.Key, UploadId: u.UploadId})
	}
}

// uploads returns the unfinished multipart uploads under prefix.
func uploads(t testing.TB, s *Store, prefix string) []types.MultipartUpload {
	t.Helper()
	out, err := s.client.ListMultipartUploads(context.Background(), &awss3.ListMultipartUploadsInput{Bucket: &s.cfg.Bucket, Prefix: &prefix})
	if err != nil {
		t.Errorf("listing uploads under %s: %v", prefix, err)
		return nil
	}
	return out.Uploads
}

func TestConformance(t *testing.T) {
	serverConfig(t) // skips (or fails) once, not in every test
	blobtest.Run(t, func(t *testing.T) blob.Store { return newStore(t) })
}

// putObject puts data at key as a caller would, without the store.
func putObject(t *testing.T, s *Store, key string, data []byte) {
	t.Helper()
	_, err := s.client.PutObject(context.Background(), &awss3.PutObjectInput{
		Bucket: &s.cfg.Bucket, Key: &key, Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
	})
	if err != nil {
		t.Fatal(err)
	}
}

func readAll(s *Store, ref string) ([]byte, int64, error) {
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
	s := newStore(t)
	mine, err := s.Put(ctx, strings.NewReader("mine"))
	if err != nil {
		t.Fatal(err)
	}
	// A caller's object beside the store's blobs, and one named like a blob
	// of another prefix, whose bytes do not match its name.
	h := sha256.Sum256([]byte("something else"))
	keys := []string{s.cfg.Prefix + "/callers/payload.json", s.cfg.Prefix + "/other/sha256/" + hex.EncodeToString(h[:])}
	for _, key := range keys {
		payload := []byte(`{"caller":"` + key + `"}`)
		putObject(t, s, key, payload)
		ref := "s3://" + s.cfg.Bucket + "/" + key
		if s.Owns(ref) {
			t.Errorf("Owns(%s) = true", ref)
		}
		data, size, err := readAll(s, ref)
		if err != nil || !bytes.Equal(data, payload) || size != int64(len(payload)) {
			t.Errorf("Open(%s) reads %q (size %d), %v; want %q", ref, data, size, err, payload)
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
		"s3://" + s.cfg.Bucket + "/" + s.cfg.Prefix + "/callers/missing.json",
		"s3://retrykit-test-no-such-bucket/key",
	} {
		if _, _, err := s.Open(ctx, ref); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("Open(%s) = %v, want ErrNotFound", ref, err)
		}
	}
}

// TestRefForm: s3://<bucket>/<prefix>/sha256/<hex>, and sha256/<hex> at the
// top of a bucket without a prefix.
func TestRefForm(t *testing.T) {
	s := newStore(t)
	b, err := s.Put(context.Background(), strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	const sum = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
	if want := "s3://" + s.cfg.Bucket + "/" + s.cfg.Prefix + "/sha256/" + sum; b.Ref != want {
		t.Errorf("Ref = %s, want %s", b.Ref, want)
	}
	top, err := New(Config{Bucket: "b-1", Region: "r", AccessKeyID: "a", SecretAccessKey: "s"})
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
	s := newStore(t)
	f, err := os.CreateTemp(t.TempDir(), "body")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("the body"); err != nil {
		t.Fatal(err)
	}
	wrong := sha256.Sum256([]byte("another body"))
	if err := s.putSingle(context.Background(), s.keyPrefix+"x", f, 8, hex.EncodeToString(wrong[:])); err == nil {
		t.Errorf("a PUT signed with another body's SHA-256 succeeded")
	}
	right := sha256.Sum256([]byte("the body"))
	if err := s.putSingle(context.Background(), s.keyPrefix+"x", f, 8, hex.EncodeToString(right[:])); err != nil {
		t.Errorf("a PUT signed with its SHA-256 = %v", err)
	}
}

// TestCorrupt: a blob whose object was replaced fails to read, before its end.
func TestCorrupt(t *testing.T) {
	s := newStore(t)
	body := bytes.Repeat([]byte("0123456789"), 100_000)
	b, err := s.Put(context.Background(), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	body[500_000] = 'x'
	putObject(t, s, strings.TrimPrefix(b.Ref, "s3://"+s.cfg.Bucket+"/"), body)
	data, _, err := readAll(s, b.Ref)
	if !errors.Is(err, blob.ErrCorrupt) || len(data) >= len(body) {
		t.Errorf("reading a replaced blob = %d bytes, %v; want fewer than %d, ErrCorrupt", len(data), err, len(body))
	}
}

// TestMultipartAborted: a multipart upload that fails is aborted, leaving no
// object and no parts.
func TestMultipartAborted(t *testing.T) {
	s := newStore(t)
	s.maxSinglePut, s.partSize = 1<<20, 1<<20 // parts below S3's 5 MiB: completing fails
	_, err := s.Put(context.Background(), bytes.NewReader(make([]byte, 3<<20)))
	if err == nil {
		t.Skip("the server completed an upload of 1 MiB parts: it does not enforce S3's minimum part size")
	}
	if us := uploads(t, s, s.keyPrefix); len(us) != 0 {
		t.Errorf("%d multipart uploads left behind, want none", len(us))
	}
	n := 0
	if err := s.List(context.Background(), func(blob.Info) error { n++; return nil }); err != nil || n != 0 {
		t.Errorf("List = %d blobs, %v; want none", n, err)
	}
}

// TestOpenURL: Open checks the bucket.
func TestOpenURL(t *testing.T) {
	cfg := serverConfig(t)
	if _, custom := os.LookupEnv("RETRYKIT_S3"); !custom {
		t.Setenv("AWS_ACCESS_KEY_ID", defaultAccessKey)
		t.Setenv("AWS_SECRET_ACCESS_KEY", defaultSecretKey)
		t.Setenv("AWS_SESSION_TOKEN", "")
	}
	spec := os.Getenv("RETRYKIT_S3")
	if spec == "" {
		spec = defaultURL
	}
	s, err := Open(context.Background(), spec)
	if err != nil {
		t.Fatalf("Open(%s) = %v", spec, err)
	}
	s.Close()
	missing := strings.Replace(spec, cfg.Bucket, "retrykit-test-no-such-bucket", 1)
	if _, err := Open(context.Background(), missing); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("Open(%s) = %v, want ErrNotFound", missing, err)
	}
}

func TestParseURL(t *testing.T) {
	for _, k := range []string{"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "AKID")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "SECRET")
	creds := func(c Config) Config { c.AccessKeyID, c.SecretAccessKey = "AKID", "SECRET"; return c }
	for _, tt := range []struct {
		spec string
		env  map[string]string
		want Config
	}{
		{spec: "s3://bucket/some/prefix/?endpoint=http://127.0.0.1:7070&region=eu-west-3",
			want: Config{Bucket: "bucket", Prefix: "some/prefix", Endpoint: "http://127.0.0.1:7070", Region: "eu-west-3", PathStyle: true}},
		{spec: "s3://bucket?endpoint=https://minio.example:9000",
			want: Config{Bucket: "bucket", Endpoint: "https://minio.example:9000", Region: "us-east-1", PathStyle: true}},
		{spec: "s3://my.bucket/p?region=us-west-2&tmpdir=/var/tmp",
			want: Config{Bucket: "my.bucket", Prefix: "p", Region: "us-west-2", TempDir: "/var/tmp"}},
		{spec: "s3://bucket/p", env: map[string]string{"AWS_REGION": "ap-south-1", "AWS_DEFAULT_REGION": "x"},
			want: Config{Bucket: "bucket", Prefix: "p", Region: "ap-south-1"}},
		{spec: "s3://bucket/p", env: map[string]string{"AWS_DEFAULT_REGION": "ap-south-2"},
			want: Config{Bucket: "bucket", Prefix: "p", Region: "ap-south-2"}},
		{spec: "s3://bucket", env: map[string]string{"AWS_ENDPOINT_URL": "http://ceph:80", "AWS_SESSION_TOKEN": "TOKEN"},
			want: Config{Bucket: "bucket", Endpoint: "http://ceph:80", Region: "us-east-1", PathStyle: true, SessionToken: "TOKEN"}},
		{spec: "s3://bucket?endpoint=http://a:1", env: map[string]string{"AWS_ENDPOINT_URL_S3": "http://b:2"},
			want: Config{Bucket: "bucket", Endpoint: "http://a:1", Region: "us-east-1", PathStyle: true}},
	} {
		t.Run(tt.spec, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			got, err := ParseURL(tt.spec)
			if want := creds(tt.want); err != nil || got != want {
				t.Errorf("ParseURL(%s) = %+v, %v; want %+v", tt.spec, got, err, want)
			}
		})
	}
	for _, spec := range []string{
		"", "bucket", "http://bucket/p", "s3:bucket", "s3://", "s3:///p", "s3://b/p?region=r", "s3://bucket:9000/p?region=r",
		"s3://bu cket?region=r", "s3://user:pass@bucket?region=r", "s3://bucket/p?region=r&bogus=1",
		"s3://bucket/p?region=r&region=s", "s3://bucket/p#x?region=r", "s3://bucket/a//b?region=r",
		"s3://bucket?endpoint=127.0.0.1:7070", "s3://bucket?endpoint=ftp://h", "s3://bucket/p",
	} {
		if got, err := ParseURL(spec); err == nil {
			t.Errorf("ParseURL(%q) = %+v, want an error", spec, got)
		} else if strings.Contains(err.Error(), "pass") {
			t.Errorf("ParseURL(%q) = %v, which shows the password", spec, err)
		}
	}
}

func TestNewErrors(t *testing.T) {
	ok := Config{Bucket: "bucket", Region: "r", AccessKeyID: "a", SecretAccessKey: "s"}
	for what, c := range map[string]Config{
		"no bucket":     {Region: "r", AccessKeyID: "a", SecretAccessKey: "s"},
		"no region":     {Bucket: "bucket", AccessKeyID: "a", SecretAccessKey: "s"},
		"no key":        {Bucket: "bucket", Region: "r", SecretAccessKey: "s"},
		"no secret":     {Bucket: "bucket", Region: "r", AccessKeyID: "a"},
		"no tmpdir":     {Bucket: "bucket", Region: "r", AccessKeyID: "a", SecretAccessKey: "s", TempDir: "/no/such/dir"},
		"tmpdir a file": {Bucket: "bucket", Region: "r", AccessKeyID: "a", SecretAccessKey: "s", TempDir: "/etc/hostname"},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("New(%s) = nil error", what)
		}
	}
	if _, err := New(ok); err != nil {
		t.Errorf("New(%+v) = %v", ok, err)
	}
}

// TestMultipart: a body above the single PUT's limit goes up in parts.
func TestMultipart(t *testing.T) {
	s := newStore(t) // parts of 5 MiB above 8 MiB
	body := make([]byte, 12<<20)
	_, _ = rand.Read(body)
	b, err := s.Put(context.Background(), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimPrefix(b.Ref, "s3://"+s.cfg.Bucket+"/")
	head, err := s.client.HeadObject(context.Background(), &awss3.HeadObjectInput{Bucket: &s.cfg.Bucket, Key: &key})
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
