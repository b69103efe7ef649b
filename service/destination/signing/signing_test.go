package signing_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/retrykit/retry/service/destination/signing"
)

// The reference library's own test vector (libraries/go/webhook_test.go,
// TestWebhookSign).
const (
	vectorSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorUnix   = 1614265330
	vectorBody   = `{"test": 2432232314}`
	vectorSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func parse(t testing.TB, s string) []byte {
	t.Helper()
	b, err := signing.ParseSecret(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newSecret(t testing.TB) []byte {
	t.Helper()
	s, err := signing.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	return parse(t, s)
}

func reference(t testing.TB, secret []byte) *standardwebhooks.Webhook {
	t.Helper()
	wh, err := standardwebhooks.NewWebhookRaw(secret)
	if err != nil {
		t.Fatal(err)
	}
	return wh
}

func TestKnownVectorMatchesReference(t *testing.T) {
	secret := parse(t, vectorSecret)
	ts := time.Unix(vectorUnix, 0)
	wh, err := standardwebhooks.NewWebhook(vectorSecret)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := wh.Sign(vectorID, ts, []byte(vectorBody))
	if err != nil {
		t.Fatal(err)
	}
	ours, err := signing.SignBytes([][]byte{secret}, vectorID, ts, []byte(vectorBody))
	if err != nil {
		t.Fatal(err)
	}
	streamed, err := signing.Sign([][]byte{secret}, vectorID, ts, strings.NewReader(vectorBody))
	if err != nil {
		t.Fatal(err)
	}
	if ours != ref || streamed != ref || ref != vectorSig {
		t.Fatalf("SignBytes %q, Sign %q, reference %q, vector %q: want all equal", ours, streamed, ref, vectorSig)
	}
	// Only whole seconds are signed, as webhook-timestamp carries them.
	frac, err := signing.SignBytes([][]byte{secret}, vectorID, ts.Add(999*time.Millisecond), []byte(vectorBody))
	if err != nil || frac != vectorSig {
		t.Fatalf("signature with a fraction of a second: %q, %v", frac, err)
	}
}

func TestReferenceVerifiesOneSecret(t *testing.T) {
	secret := newSecret(t)
	body := []byte(`{"type":"invoice.paid","data":{"id":"in_1"}}`)
	h, err := signing.Headers([][]byte{secret}, "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", time.Now(), body)
	if err != nil {
		t.Fatal(err)
	}
	if err := reference(t, secret).Verify(body, h); err != nil {
		t.Fatalf("reference Verify: %v (headers %v)", err, h)
	}
	if err := reference(t, newSecret(t)).Verify(body, h); err == nil {
		t.Fatal("reference Verify accepts another secret")
	}
	if err := reference(t, secret).Verify(append(body, ' '), h); err == nil {
		t.Fatal("reference Verify accepts another body")
	}
	if err := signing.Verify([][]byte{secret}, h, body, time.Now(), 0); err != nil {
		t.Fatalf("Verify: %v", err)
	}
}

func TestRotationOverlap(t *testing.T) {
	oldSecret, newSecretB, other := newSecret(t), newSecret(t), newSecret(t)
	body := []byte(`{"type":"invoice.paid"}`)
	h, err := signing.Headers([][]byte{newSecretB, oldSecret}, "msg_1", time.Now(), body)
	if err != nil {
		t.Fatal(err)
	}
	if sigs := strings.Split(h.Get(signing.HeaderSignature), " "); len(sigs) != 2 {
		t.Fatalf("signature header %q: want two signatures", h.Get(signing.HeaderSignature))
	}
	// A receiver that holds either secret accepts the message.
	for name, s := range map[string][]byte{"old": oldSecret, "new": newSecretB} {
		if err := reference(t, s).Verify(body, h); err != nil {
			t.Errorf("reference Verify with the %s secret: %v", name, err)
		}
		if err := signing.Verify([][]byte{s}, h, body, time.Now(), 0); err != nil {
			t.Errorf("Verify with the %s secret: %v", name, err)
		}
	}
	if err := reference(t, other).Verify(body, h); err == nil {
		t.Error("reference Verify accepts a third secret")
	}
	if err := signing.Verify([][]byte{other}, h, body, time.Now(), 0); !errors.Is(err, signing.ErrNoMatch) {
		t.Errorf("Verify with a third secret: err = %v, want ErrNoMatch", err)
	}
}

// pattern is an endless reader of a repeating text, a body that is never
// held whole.
type pattern struct{ off int }

const text = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.,"

func (p *pattern) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = text[(p.off+i)%len(text)]
	}
	p.off += len(b)
	return len(b), nil
}

func TestSignStreamsLargeBody(t *testing.T) {
	const size = 8 << 20
	secrets := [][]byte{newSecret(t), newSecret(t)}
	ts := time.Now()

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	sig, err := signing.Sign(secrets, "msg_big", ts, io.LimitReader(&pattern{}, size))
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	// io.Copy's buffer and the HMACs, whatever the size of the body.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 256<<10 {
		t.Fatalf("Sign of a %d-byte body allocated %d bytes", size, alloc)
	}

	body, err := io.ReadAll(io.LimitReader(&pattern{}, size))
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set(signing.HeaderID, "msg_big")
	h.Set(signing.HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(signing.HeaderSignature, sig)
	for i, s := range secrets {
		if err := reference(t, s).Verify(body, h); err != nil {
			t.Fatalf("reference Verify with secret %d: %v", i+1, err)
		}
	}
	if whole, err := signing.SignBytes(secrets, "msg_big", ts, body); err != nil || whole != sig {
		t.Fatalf("SignBytes %q, %v; Sign %q", whole, err, sig)
	}
}

type failing struct{}

func (failing) Read([]byte) (int, error) { return 0, errors.New("blob store gone") }

func TestSignErrors(t *testing.T) {
	s := [][]byte{newSecret(t)}
	now := time.Now()
	for _, id := range []string{"", "msg 1", "msg\n1", "msg\x001", "msg\x7f"} {
		if _, err := signing.SignBytes(s, id, now, nil); !errors.Is(err, signing.ErrBadID) {
			t.Errorf("SignBytes with ID %q: err = %v, want ErrBadID", id, err)
		}
	}
	if _, err := signing.SignBytes(nil, "msg_1", now, nil); !errors.Is(err, signing.ErrNoSecret) {
		t.Errorf("no secrets: err = %v, want ErrNoSecret", err)
	}
	if _, err := signing.Headers([][]byte{s[0], {}}, "msg_1", now, nil); !errors.Is(err, signing.ErrBadSecret) {
		t.Errorf("an empty secret: err = %v, want ErrBadSecret", err)
	}
	if _, err := signing.Sign(s, "msg_1", now, failing{}); err == nil || !strings.Contains(err.Error(), "blob store gone") {
		t.Errorf("failing body: err = %v", err)
	}
}

func TestSecrets(t *testing.T) {
	a, err := signing.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := signing.NewSecret()
	if a == b || !strings.HasPrefix(a, "whsec_") || len(parse(t, a)) != 32 {
		t.Fatalf("NewSecret gave %q and %q", a, b)
	}
	// The reference library reads our secrets as we do.
	if _, err := standardwebhooks.NewWebhook(a); err != nil {
		t.Fatal(err)
	}
	enc := base64.StdEncoding.EncodeToString
	for _, ok := range []string{vectorSecret, "whsec_" + enc(make([]byte, 24)), "whsec_" + enc(make([]byte, 64))} {
		if _, err := signing.ParseSecret(ok); err != nil {
			t.Errorf("ParseSecret(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{
		"", "whsec_", enc(make([]byte, 32)), "whsk_" + enc(make([]byte, 32)),
		"whsec_" + enc(make([]byte, 23)), "whsec_" + enc(make([]byte, 65)),
		"whsec_" + base64.RawURLEncoding.EncodeToString(make([]byte, 32)) + "-_", "whsec_!!!!",
	} {
		if _, err := signing.ParseSecret(bad); !errors.Is(err, signing.ErrBadSecret) {
			t.Errorf("ParseSecret(%q): err = %v, want ErrBadSecret", bad, err)
		}
	}
}

func TestVerify(t *testing.T) {
	secret := parse(t, vectorSecret)
	ts := time.Unix(vectorUnix, 0)
	body := []byte(vectorBody)
	headers := func(id, stamp, sig string) http.Header {
		h := http.Header{}
		for k, v := range map[string]string{signing.HeaderID: id, signing.HeaderTimestamp: stamp, signing.HeaderSignature: sig} {
			if v != "" {
				h.Set(k, v)
			}
		}
		return h
	}
	stamp := strconv.Itoa(vectorUnix)
	wrong := "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="
	for _, c := range []struct {
		name string
		h    http.Header
		now  time.Time
		tol  time.Duration
		want error
	}{
		{"valid", headers(vectorID, stamp, vectorSig), ts, 0, nil},
		{"among others", headers(vectorID, stamp, "v1a,abc "+wrong+" v2,x v1, "+vectorSig), ts, 0, nil},
		{"5 min late", headers(vectorID, stamp, vectorSig), ts.Add(5 * time.Minute), 0, nil},
		{"5 min early", headers(vectorID, stamp, vectorSig), ts.Add(-5 * time.Minute), 0, nil},
		{"too old", headers(vectorID, stamp, vectorSig), ts.Add(5*time.Minute + time.Second), 0, signing.ErrTimestamp},
		{"too new", headers(vectorID, stamp, vectorSig), ts.Add(-5*time.Minute - time.Second), 0, signing.ErrTimestamp},
		{"within a wider tolerance", headers(vectorID, stamp, vectorSig), ts.Add(time.Hour), 2 * time.Hour, nil},
		{"outside a narrower tolerance", headers(vectorID, stamp, vectorSig), ts.Add(time.Minute), time.Second, signing.ErrTimestamp},
		{"wrong signature", headers(vectorID, stamp, wrong), ts, 0, signing.ErrNoMatch},
		{"empty signature", headers(vectorID, stamp, "v1,"), ts, 0, signing.ErrNoMatch},
		{"not v1", headers(vectorID, stamp, "v1a"+vectorSig[2:]), ts, 0, signing.ErrNoMatch},
		{"other ID", headers("msg_other", stamp, vectorSig), ts, 0, signing.ErrNoMatch},
		{"other timestamp", headers(vectorID, strconv.Itoa(vectorUnix+1), vectorSig), ts, 0, signing.ErrNoMatch},
		{"no ID", headers("", stamp, vectorSig), ts, 0, signing.ErrHeaders},
		{"no timestamp", headers(vectorID, "", vectorSig), ts, 0, signing.ErrHeaders},
		{"no signature", headers(vectorID, stamp, ""), ts, 0, signing.ErrHeaders},
		{"bad timestamp", headers(vectorID, "1614265330.5", vectorSig), ts, 0, signing.ErrHeaders},
		{"ID with a dot signed for another", headers(vectorID+".1", stamp, vectorSig), ts, 0, signing.ErrNoMatch},
	} {
		err := signing.Verify([][]byte{secret}, c.h, body, c.now, c.tol)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
	// Any of the receiver's secrets.
	h := headers(vectorID, stamp, vectorSig)
	if err := signing.Verify([][]byte{newSecret(t), secret}, h, body, ts, 0); err != nil {
		t.Errorf("second of two secrets: %v", err)
	}
	if err := signing.Verify([][]byte{secret}, h, append(bytes.Clone(body), ' '), ts, 0); !errors.Is(err, signing.ErrNoMatch) {
		t.Errorf("other body: err = %v, want ErrNoMatch", err)
	}
}

func BenchmarkSignBytes(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 1<<10)
	secrets := [][]byte{newSecret(b)}
	ts := time.Unix(vectorUnix, 0)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := signing.SignBytes(secrets, vectorID, ts, body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSignBytesTwoSecrets(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 1<<10)
	secrets := [][]byte{newSecret(b), newSecret(b)}
	ts := time.Unix(vectorUnix, 0)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := signing.SignBytes(secrets, vectorID, ts, body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSignStream(b *testing.B) {
	const size = 1 << 20
	secrets := [][]byte{newSecret(b)}
	ts := time.Unix(vectorUnix, 0)
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := signing.Sign(secrets, vectorID, ts, io.LimitReader(&pattern{}, size)); err != nil {
			b.Fatal(err)
		}
	}
}
