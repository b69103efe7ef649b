package dispatch_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/retrykit/retry/service/blob"
	"github.com/retrykit/retry/service/destination/signing"
	"github.com/retrykit/retry/service/dispatch"
)

const signSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// signer signs as a destination does: Standard Webhooks over the body the
// dispatcher reads.
func signer(t *testing.T, id string) func(io.Reader) ([]dispatch.Header, error) {
	key, err := signing.ParseSecret(signSecret)
	if err != nil {
		t.Fatal(err)
	}
	return func(body io.Reader) ([]dispatch.Header, error) {
		now := time.Now()
		sig, err := signing.Sign([][]byte{key}, id, now, body)
		return []dispatch.Header{{Name: "Webhook-Id", Value: id},
			{Name: "Webhook-Timestamp", Value: strconv.FormatInt(now.Unix(), 10)},
			{Name: "Webhook-Signature", Value: sig}}, err
	}
}

// verifyingTarget answers 204 to a request the reference library verifies
// and 401 to others, and records what it saw.
func verifyingTarget(t *testing.T) (*httptest.Server, func() (int, []error)) {
	wh, err := standardwebhooks.NewWebhook(signSecret)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var n int
	var errs []error
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		err := wh.Verify(body, r.Header)
		mu.Lock()
		n++
		if err != nil {
			errs = append(errs, err)
		}
		mu.Unlock()
		if err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return srv, func() (int, []error) {
		mu.Lock()
		defer mu.Unlock()
		return n, errs
	}
}

// A body by reference is read once to sign and once to send: the target
// verifies the signature of the bytes it got, with the reference library,
// from disk and from S3 alike.
func TestSignedBodyByReference(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		open func(t *testing.T) blob.Store
	}{
		{"disk", func(t *testing.T) blob.Store { st, _ := diskStore(t); return st }},
		{"s3", func(t *testing.T) blob.Store { return newS3(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bs := tc.open(t)
			ref := putBody(t, bs, 7, 5<<20)
			srv, seen := verifyingTarget(t)
			d := dispatch.New(dispatch.Config{Guard: dispatch.Guard{AllowPrivate: true}, Blobs: bs})
			defer d.Close()
			res := d.Send(context.Background(), dispatch.Request{Method: "POST", URL: srv.URL, BodyRef: ref.Ref,
				IdempotencyKey: "msg-1", Sign: signer(t, "msg-1")})
			if n, errs := seen(); res.Status != http.StatusNoContent || n != 1 || len(errs) > 0 {
				t.Errorf("status %d, err %v; the target saw %d requests, refused %v", res.Status, res.Err, n, errs)
			}
		})
	}
}

// An inline body is signed the same way; a signer that fails stops the
// attempt before anything is sent.
func TestSignedInlineBodyAndFailure(t *testing.T) {
	t.Parallel()
	srv, seen := verifyingTarget(t)
	d := dispatch.New(dispatch.Config{Guard: dispatch.Guard{AllowPrivate: true}})
	defer d.Close()
	res := d.Send(context.Background(), dispatch.Request{Method: "POST", URL: srv.URL, Body: []byte(`{"a":1}`),
		Headers: map[string]string{"webhook-signature": "v1,forged"}, Sign: signer(t, "msg-2")})
	if res.Status != http.StatusNoContent {
		t.Errorf("signed inline body: status %d, err %v", res.Status, res.Err)
	}
	boom := errors.New("no key")
	res = d.Send(context.Background(), dispatch.Request{Method: "POST", URL: srv.URL, Body: []byte("x"),
		Sign: func(io.Reader) ([]dispatch.Header, error) { return nil, boom }})
	if !errors.Is(res.Err, dispatch.ErrSign) || !errors.Is(res.Err, boom) {
		t.Errorf("failing signer: err = %v, want ErrSign wrapping its error", res.Err)
	}
	if n, _ := seen(); n != 1 {
		t.Errorf("the target saw %d requests, want only the signed one", n)
	}
}
