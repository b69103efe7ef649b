// Package s3 is the blob.Store of an S3-compatible object store — AWS S3,
// MinIO, Ceph RGW, versitygw — through the AWS SDK for Go v2.
//
// # Configuration
//
// A store is named by a URL (ParseURL):
//
//	s3://<bucket>[/<prefix>][?endpoint=<url>&region=<region>&tmpdir=<dir>]
//
// The blobs are the objects <prefix>/sha256/<hex>, their references
// s3://<bucket>/<prefix>/sha256/<hex>. endpoint is the URL of a server other
// than AWS (http://127.0.0.1:7070, say), which is then addressed path-style
// (http://127.0.0.1:7070/<bucket>/<key>); without it, AWS S3 is addressed
// as <bucket>.s3.<region>.amazonaws.com. The credentials come from the
// standard environment variables AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
// and AWS_SESSION_TOKEN (never from the URL), as do the region and the
// endpoint when the URL does not give them: AWS_REGION (or
// AWS_DEFAULT_REGION; us-east-1 for another server), and AWS_ENDPOINT_URL_S3
// (or AWS_ENDPOINT_URL). Other sources of the SDK — shared config files,
// instance roles, SSO — are not consulted.
//
// # Put
//
// The reference, and so the key, is known only once the whole body has been
// read. Put therefore spools the body to a temporary file in tmpdir (the
// system's temporary directory by default) while it hashes it, and uploads
// it from there: memory stays at a buffer however large the body, and tmpdir
// needs room for the bodies being put at once. On Unix the file loses its
// name as soon as it is made, so that a crash leaves nothing behind. Where
// the temporary directory is a tmpfs the spooled bodies are in memory after
// all: give tmpdir a directory on a disk then (beside the embedded database,
// say). The SHA-256 computed while spooling signs the upload
// (x-amz-content-sha256), so it is not computed again, and the server checks
// that the bytes it got are the bytes hashed. A body of up to 5 GiB goes in
// one PUT; a larger one in a multipart upload of parts read from the file.
// The server acknowledging the object is what makes it durable.
//
// A Put of bytes already stored uploads them again: the new object renews
// the time List gives (S3 has no cheaper way to), at the cost of the
// transfer. An interrupted multipart upload (a crash while one is in
// progress) leaves parts that are no object, that List does not see, and
// that a bucket's lifecycle rule (AbortIncompleteMultipartUpload) removes.
//
// # Open
//
// Open reads any s3://<bucket>/<key> object that the credentials may read,
// through the same endpoint: the store's own blobs, which it checks against
// their hash, and objects a caller uploaded and passed as a task's bodyRef,
// which it reads as they are (they may change between attempts) and never
// deletes. On AWS, credentials without s3:ListBucket on a bucket get
// AccessDenied rather than NoSuchKey for a missing object, which is then an
// error other than blob.ErrNotFound.
package s3

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"

	"github.com/retrykit/retry/service/blob"
	"github.com/retrykit/retry/service/blob/internal/stream"
)

// Limits of S3 uploads.
const (
	// MaxSinglePut is the largest body Put uploads in one PUT; S3 takes
	// up to 5 GiB so.
	MaxSinglePut = 5 << 30
	// PartSize is the size of a multipart upload's parts, unless the
	// body needs larger ones to fit S3's 10,000 parts.
	PartSize = 64 << 20
	maxParts = 10_000
)

// Config is what a Store needs; ParseURL makes one from a URL and the
// environment.
type Config struct {
	Bucket string
	// Prefix, without a leading or trailing slash, puts the blobs under
	// <Prefix>/sha256/; "" puts them under sha256/.
	Prefix string
	// Endpoint is the URL of a server other than AWS S3; "" is AWS.
	Endpoint string
	Region   string
	// PathStyle addresses the bucket in the path rather than in the host
	// name, as most servers other than AWS need.
	PathStyle bool

	AccessKeyID, SecretAccessKey, SessionToken string

	// TempDir is where Put spools bodies; "" is os.TempDir().
	TempDir string
}

// ParseURL reads a store's URL (see the package's documentation) and the
// environment variables it leaves to them.
func ParseURL(spec string) (Config, error) {
	fail := func(format string, args ...any) (Config, error) {
		return Config{}, fmt.Errorf("blob: S3 URL %q: %s", redact(spec), fmt.Sprintf(format, args...))
	}
	u, err := url.Parse(spec)
	if err != nil {
		return fail("%v", err)
	}
	if u.Scheme != "s3" || u.Opaque != "" {
		return fail("want s3://bucket/prefix?endpoint=…&region=…")
	}
	if u.User != nil {
		return fail("credentials go in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, not in the URL")
	}
	if u.Fragment != "" {
		return fail("a fragment (#) means nothing here")
	}
	c := Config{Bucket: u.Host, Prefix: strings.Trim(u.Path, "/")}
	if !blob.ValidBucket(c.Bucket) {
		return fail("bucket %q: want 3 to 63 letters, digits, dots, hyphens and underscores", c.Bucket)
	}
	if strings.Contains(c.Prefix, "//") {
		return fail("prefix %q has an empty segment", c.Prefix)
	}
	q := u.Query()
	for k, vs := range q {
		switch k {
		case "endpoint", "region", "tmpdir":
			if len(vs) > 1 {
				return fail("%s is given %d times", k, len(vs))
			}
		default:
			return fail("unknown parameter %q (know endpoint, region, tmpdir)", k)
		}
	}
	c.Endpoint = first(q.Get("endpoint"), os.Getenv("AWS_ENDPOINT_URL_S3"), os.Getenv("AWS_ENDPOINT_URL"))
	if c.Endpoint != "" {
		e, err := url.Parse(c.Endpoint)
		if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" {
			return fail("endpoint %q: want http://host[:port] or https://host[:port]", c.Endpoint)
		}
		c.PathStyle = true
	}
	c.Region = first(q.Get("region"), os.Getenv("AWS_REGION"), os.Getenv("AWS_DEFAULT_REGION"))
	if c.Region == "" {
		if c.Endpoint == "" {
			return fail("no region: give region= or set AWS_REGION")
		}
		c.Region = "us-east-1"
	}
	c.TempDir = q.Get("tmpdir")
	c.AccessKeyID = os.Getenv("AWS_ACCESS_KEY_ID")
	c.SecretAccessKey = os.Getenv("AWS_SECRET_ACCESS_KEY")
	c.SessionToken = os.Getenv("AWS_SESSION_TOKEN")
	return c, nil
}

func first(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// redact hides the password of a URL that has one, for error messages.
func redact(spec string) string {
	if u, err := url.Parse(spec); err == nil && u.User != nil {
		return u.Redacted()
	}
	return spec
}

// Store is the S3 blob.Store.
type Store struct {
	cfg       Config
	client    *awss3.Client
	transport *http.Transport
	keyPrefix string // <prefix>/sha256/ or sha256/
	refPrefix string // s3://<bucket>/<keyPrefix>
	closed    atomic.Bool

	maxSinglePut, partSize int64 // MaxSinglePut and PartSize, but in tests
}

var _ blob.Store = (*Store)(nil)

// Open opens the store spec names (ParseURL) and checks that its bucket
// answers (Check).
func Open(ctx context.Context, spec string) (*Store, error) {
	cfg, err := ParseURL(spec)
	if err != nil {
		return nil, err
	}
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if err := s.Check(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// New makes a Store of cfg, without asking the server anything.
func New(cfg Config) (*Store, error) {
	if !blob.ValidBucket(cfg.Bucket) {
		return nil, fmt.Errorf("blob: S3 bucket %q: want 3 to 63 letters, digits, dots, hyphens and underscores", cfg.Bucket)
	}
	if cfg.Region == "" {
		return nil, errors.New("blob: S3: no region")
	}
	if cfg.AccessKeyID == "" || cfg.SecretAccessKey == "" {
		return nil, errors.New("blob: S3: no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
	}
	if cfg.TempDir == "" {
		cfg.TempDir = os.TempDir()
	}
	if fi, err := os.Stat(cfg.TempDir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("blob: S3: tmpdir %s is no directory (%v)", cfg.TempDir, err)
	}
	cfg.Prefix = strings.Trim(cfg.Prefix, "/")
	s := &Store{cfg: cfg, keyPrefix: "sha256/", maxSinglePut: MaxSinglePut, partSize: PartSize}
	if cfg.Prefix != "" {
		s.keyPrefix = cfg.Prefix + "/sha256/"
	}
	s.refPrefix = "s3://" + cfg.Bucket + "/" + s.keyPrefix

	s.transport = http.DefaultTransport.(*http.Transport).Clone()
	s.transport.MaxIdleConnsPerHost = 32 // attempts read bodies concurrently
	opts := awss3.Options{
		Region:       cfg.Region,
		Credentials:  credentials(cfg),
		UsePathStyle: cfg.PathStyle,
		HTTPClient:   &http.Client{Transport: s.transport},
		// The SDK's default adds CRC checksums (aws-chunked over TLS) that
		// not every S3-compatible server takes; the signed SHA-256 of the
		// payload already guards the upload.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	if cfg.Endpoint != "" {
		opts.BaseEndpoint = aws.String(cfg.Endpoint)
	}
	s.client = awss3.New(opts)
	return s, nil
}

type credentials Config

func (c credentials) Retrieve(context.Context) (aws.Credentials, error) {
	return aws.Credentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey,
		SessionToken: c.SessionToken, Source: "retrykit blob/s3 Config"}, nil
}

// Check asks the server whether the bucket is there and the credentials
// reach it (a HEAD of the bucket).
func (s *Store) Check(ctx context.Context) error {
	if s.closed.Load() {
		return blob.ErrClosed
	}
	if _, err := s.client.HeadBucket(ctx, &awss3.HeadBucketInput{Bucket: &s.cfg.Bucket}); err != nil {
		if isNotFound(err) {
			return fmt.Errorf("blob: S3 bucket %s: %w", s.cfg.Bucket, blob.ErrNotFound)
		}
		return fmt.Errorf("blob: S3 bucket %s: %w", s.cfg.Bucket, err)
	}
	return nil
}

// Ref returns the reference of the store's blob whose SHA-256 is sum.
func (s *Store) Ref(sum [32]byte) string { return s.refPrefix + hex.EncodeToString(sum[:]) }

// owned returns the SHA-256 that bucket/key is the blob of, if it is one
// of the store's.
func (s *Store) owned(bucket, key string) ([32]byte, bool) {
	h, ok := strings.CutPrefix(key, s.keyPrefix)
	if !ok || bucket != s.cfg.Bucket {
		return [32]byte{}, false
	}
	return blob.ParseHex(h)
}

// Put implements blob.Store; see the package's documentation.
func (s *Store) Put(ctx context.Context, r io.Reader) (blob.Blob, error) {
	if s.closed.Load() {
		return blob.Blob{}, blob.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return blob.Blob{}, err
	}
	f, err := os.CreateTemp(s.cfg.TempDir, "retryd-blob-*")
	if err != nil {
		return blob.Blob{}, fmt.Errorf("blob: put: %w", err)
	}
	if err := os.Remove(f.Name()); err != nil { // Windows: not while it is open
		defer os.Remove(f.Name())
	}
	defer f.Close()
	n, sum, err := stream.Copy(ctx, f, r)
	if err != nil {
		return blob.Blob{}, fmt.Errorf("blob: put: %w", err)
	}
	b := blob.Blob{Ref: s.Ref(sum), Size: n, SHA256: sum}
	key := strings.TrimPrefix(b.Ref, "s3://"+s.cfg.Bucket+"/")
	if n <= s.maxSinglePut {
		err = s.putSingle(ctx, key, f, n, b.Hex())
	} else {
		err = s.putMultipart(ctx, key, f, n)
	}
	if err != nil {
		return blob.Blob{}, fmt.Errorf("blob: put %s: %w", b.Ref, err)
	}
	return b, nil
}

func (s *Store) putSingle(ctx context.Context, key string, f *os.File, n int64, sha256Hex string) error {
	_, err := s.client.PutObject(ctx, &awss3.PutObjectInput{
		Bucket:        &s.cfg.Bucket,
		Key:           &key,
		Body:          io.NewSectionReader(f, 0, n), // seekable: the SDK rewinds it to retry
		ContentLength: aws.Int64(n),
		ContentType:   aws.String("application/octet-stream"),
	}, withPayloadHash(sha256Hex))
	return err
}

// withPayloadHash has the SDK sign a request with the payload's SHA-256
// given, instead of reading the payload to compute it.
func withPayloadHash(sha256Hex string) func(*awss3.Options) {
	return func(o *awss3.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Initialize.Add(middleware.InitializeMiddlewareFunc("RetrykitPayloadHash",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (
					middleware.InitializeOutput, middleware.Metadata, error,
				) {
					return next.HandleInitialize(v4.SetPayloadHash(ctx, sha256Hex), in)
				}), middleware.Before)
		})
	}
}

// putMultipart uploads the n bytes of f in parts, each signed with a hash
// the SDK computes by reading it (a second read of the file, from the page
// cache as a rule).
func (s *Store) putMultipart(ctx context.Context, key string, f *os.File, n int64) error {
	up, err := s.client.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{
		Bucket: &s.cfg.Bucket, Key: &key, ContentType: aws.String("application/octet-stream"),
	})
	if err != nil {
		return err
	}
	completed := false
	defer func() {
		if !completed {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			_, _ = s.client.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{
				Bucket: &s.cfg.Bucket, Key: &key, UploadId: up.UploadId,
			})
		}
	}()
	partSize := max(s.partSize, (n+maxParts-1)/maxParts)
	var parts []types.CompletedPart
	for i, off := int32(1), int64(0); off < n; i, off = i+1, off+partSize {
		size := min(partSize, n-off)
		out, err := s.client.UploadPart(ctx, &awss3.UploadPartInput{
			Bucket: &s.cfg.Bucket, Key: &key, UploadId: up.UploadId, PartNumber: aws.Int32(i),
			Body: io.NewSectionReader(f, off, size), ContentLength: aws.Int64(size),
		})
		if err != nil {
			return fmt.Errorf("part %d: %w", i, err)
		}
		parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(i)})
	}
	if err := ctx.Err(); err != nil { // the last moment nothing is visible yet
		return err
	}
	_, err = s.client.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{
		Bucket: &s.cfg.Bucket, Key: &key, UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	})
	completed = err == nil
	return err
}

// Open implements blob.Store: any s3://bucket/key object the credentials
// may read, the store's own blobs checked against their hash.
func (s *Store) Open(ctx context.Context, ref string) (io.ReadCloser, int64, error) {
	if s.closed.Load() {
		return nil, 0, blob.ErrClosed
	}
	bucket, key, err := blob.ParseS3Ref(ref)
	if err != nil {
		return nil, 0, err
	}
	out, err := s.client.GetObject(ctx, &awss3.GetObjectInput{Bucket: &bucket, Key: &key})
	if err != nil {
		if isNotFound(err) {
			return nil, 0, fmt.Errorf("%w: %s", blob.ErrNotFound, ref)
		}
		return nil, 0, fmt.Errorf("blob: open %s: %w", ref, err)
	}
	if out.ContentLength == nil || *out.ContentLength < 0 {
		out.Body.Close()
		return nil, 0, fmt.Errorf("blob: open %s: the server gave no Content-Length", ref)
	}
	size := *out.ContentLength
	// The body stops on ctx's end only once the HTTP client notices, on a
	// goroutine of its own, and closes the connection: meanwhile it reads
	// on what the connection has buffered, megabytes on loopback. Checked
	// before each read, ctx stops it at once, as blob.Store promises.
	body := stream.WithContext(ctx, out.Body)
	if sum, ok := s.owned(bucket, key); ok {
		return stream.Verify(body, ref, size, sum), size, nil
	}
	return body, size, nil
}

// Delete implements blob.Store: only the store's own blobs.
func (s *Store) Delete(ctx context.Context, ref string) error {
	if s.closed.Load() {
		return blob.ErrClosed
	}
	bucket, key, err := blob.ParseS3Ref(ref)
	if err != nil {
		return err
	}
	if _, ok := s.owned(bucket, key); !ok {
		return fmt.Errorf("%w: %.200q is not under %s", blob.ErrNotOwned, ref, s.refPrefix)
	}
	if _, err := s.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &bucket, Key: &key}); err != nil && !isNotFound(err) {
		return fmt.Errorf("blob: delete %s: %w", ref, err)
	}
	return nil
}

// List implements blob.Store, a page of 1,000 keys at a time. Objects under
// <prefix>/sha256/ that are not named <hex> are left out.
func (s *Store) List(ctx context.Context, each func(blob.Info) error) error {
	p := awss3.NewListObjectsV2Paginator(s.client, &awss3.ListObjectsV2Input{Bucket: &s.cfg.Bucket, Prefix: &s.keyPrefix})
	for p.HasMorePages() {
		if s.closed.Load() {
			return blob.ErrClosed
		}
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("blob: list %s: %w", s.refPrefix, err)
		}
		for _, o := range page.Contents {
			key := aws.ToString(o.Key)
			if _, ok := s.owned(s.cfg.Bucket, key); !ok {
				continue
			}
			in := blob.Info{Ref: "s3://" + s.cfg.Bucket + "/" + key, Size: aws.ToInt64(o.Size), PutAt: aws.ToTime(o.LastModified)}
			if err := each(in); err != nil {
				return err
			}
		}
	}
	return nil
}

// Owns implements blob.Store: s3://<bucket>/<prefix>/sha256/<hex>.
func (s *Store) Owns(ref string) bool {
	bucket, key, err := blob.ParseS3Ref(ref)
	if err != nil {
		return false
	}
	_, ok := s.owned(bucket, key)
	return ok
}

// Close implements blob.Store: it closes the idle connections to the
// server. Readers already open go on working.
func (s *Store) Close() error {
	if !s.closed.Swap(true) {
		s.transport.CloseIdleConnections()
	}
	return nil
}

// isNotFound reports whether err is the server's "no such key" or "no such
// bucket" (or a bare 404, as HEAD answers).
func isNotFound(err error) bool {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "NoSuchKey", "NoSuchBucket", "NotFound":
			return true
		}
	}
	var re *awshttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound
}
