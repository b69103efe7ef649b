// Package s3test gives tests the S3 server this repository tests against:
// versitygw on 127.0.0.1:7070 with fixed credentials, as .ci/servers starts
// it, unless RETRYKIT_S3 names another store, whose credentials then come
// from the AWS_* environment variables as retryd's do.
package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/retrykit/retry/service/blob/s3"
	"github.com/retrykit/retry/service/servertest"
)

// The default test server.
const (
	DefaultURL       = "s3://retrykit-test?endpoint=http://127.0.0.1:7070&region=us-east-1"
	DefaultAccessKey = "retrykit"
	DefaultSecretKey = "retrykit-secret"
)

var server struct {
	sync.Mutex
	checked bool
	missing string // why there is no server to test with
}

// Config returns the test server's Config on a prefix of t's own (name, then
// random digits), with the bucket in place; every object and unfinished
// multipart upload under the prefix is deleted when t ends. Without an
// answer from the server t is skipped, or fails in CI (servertest.Missing);
// the server is asked once a process.
func Config(t testing.TB, name string) s3.Config {
	t.Helper()
	spec, custom := os.LookupEnv("RETRYKIT_S3")
	if !custom {
		spec = DefaultURL
	}
	cfg, err := s3.ParseURL(spec)
	if err != nil {
		t.Fatalf("RETRYKIT_S3: %v", err)
	}
	if !custom {
		cfg.AccessKeyID, cfg.SecretAccessKey, cfg.SessionToken = DefaultAccessKey, DefaultSecretKey, ""
	}
	server.Lock()
	if !server.checked {
		server.missing = check(t, spec, cfg)
		server.checked = true
	}
	missing := server.missing
	server.Unlock()
	if missing != "" {
		servertest.Missing(t, missing)
	}
	var r [6]byte
	_, _ = rand.Read(r[:])
	cfg.Prefix = strings.Trim(cfg.Prefix+"/"+name+"-"+hex.EncodeToString(r[:]), "/")
	t.Cleanup(func() { clean(t, cfg) })
	return cfg
}

// Client returns a plain S3 client of cfg's server, to put or delete objects
// as a caller of retryd would.
func Client(cfg s3.Config) *awss3.Client {
	opts := awss3.Options{
		Region: cfg.Region, UsePathStyle: cfg.PathStyle,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: cfg.AccessKeyID, SecretAccessKey: cfg.SecretAccessKey, SessionToken: cfg.SessionToken}, nil
		}),
		// Not every S3-compatible server takes the SDK's default checksums.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	if cfg.Endpoint != "" {
		opts.BaseEndpoint = aws.String(cfg.Endpoint)
	}
	return awss3.New(opts)
}

// check asks the server for the bucket, creating it when it is missing, and
// returns why there is no server if there is none.
func check(t testing.TB, spec string, cfg s3.Config) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := Client(cfg)
	_, err := c.HeadBucket(ctx, &awss3.HeadBucketInput{Bucket: &cfg.Bucket})
	var ae smithy.APIError
	if errors.As(err, &ae) && (ae.ErrorCode() == "NotFound" || ae.ErrorCode() == "NoSuchBucket") {
		_, err = c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: &cfg.Bucket})
		var owned *types.BucketAlreadyOwnedByYou
		if errors.As(err, &owned) {
			err = nil
		}
	}
	if err != nil {
		if errors.As(err, &ae) { // the server answered
			t.Fatalf("S3 test server %s: %v", spec, err)
		}
		return "no S3 server answers at " + spec + " (" + err.Error() + "): start versitygw with .ci/servers, " +
			"or point RETRYKIT_S3 at a store (credentials in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"
	}
	return ""
}

// clean deletes every object and unfinished upload under cfg's prefix.
func clean(t testing.TB, cfg s3.Config) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := Client(cfg)
	prefix := cfg.Prefix + "/"
	p := awss3.NewListObjectsV2Paginator(c, &awss3.ListObjectsV2Input{Bucket: &cfg.Bucket, Prefix: &prefix})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Errorf("cleaning %s: %v", prefix, err)
			return
		}
		for _, o := range out.Contents {
			if _, err := c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &cfg.Bucket, Key: o.Key}); err != nil {
				t.Errorf("cleaning %s: %v", *o.Key, err)
			}
		}
	}
	for _, u := range Uploads(t, cfg) {
		_, _ = c.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{Bucket: &cfg.Bucket, Key: u.Key, UploadId: u.UploadId})
	}
}

// Uploads returns the unfinished multipart uploads under cfg's prefix.
func Uploads(t testing.TB, cfg s3.Config) []types.MultipartUpload {
	t.Helper()
	prefix := cfg.Prefix + "/"
	out, err := Client(cfg).ListMultipartUploads(context.Background(),
		&awss3.ListMultipartUploadsInput{Bucket: &cfg.Bucket, Prefix: &prefix})
	if err != nil {
		t.Errorf("listing uploads under %s: %v", prefix, err)
		return nil
	}
	return out.Uploads
}
