package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/retrykit/retry/service/blob"
)

// memBlobs is a blob.Store in memory, for the decoder's tests.
type memBlobs struct {
	mu    sync.Mutex
	blobs map[string][]byte
	fail  error // when set, Put fails with it after reading a little
}

func newMemBlobs() *memBlobs { return &memBlobs{blobs: map[string][]byte{}} }

const memPrefix = "mem:sha256:"

func (m *memBlobs) Put(ctx context.Context, r io.Reader) (blob.Blob, error) {
	if m.fail != nil {
		io.CopyN(io.Discard, r, 10)
		return blob.Blob{}, m.fail
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return blob.Blob{}, err
	}
	sum := sha256.Sum256(data)
	b := blob.Blob{Ref: memPrefix + hex.EncodeToString(sum[:]), Size: int64(len(data)), SHA256: sum}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.blobs[b.Ref] = data
	return b, nil
}

func (m *memBlobs) Open(ctx context.Context, ref string) (io.ReadCloser, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	data, ok := m.blobs[ref]
	if !ok {
		return nil, 0, blob.ErrNotFound
	}
	return io.NopCloser(bytes.NewReader(data)), int64(len(data)), nil
}

func (m *memBlobs) Delete(ctx context.Context, ref string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.blobs, ref)
	return nil
}

func (m *memBlobs) List(ctx context.Context, each func(blob.Info) error) error {
	m.mu.Lock()
	refs := maps.Clone(m.blobs)
	m.mu.Unlock()
	for ref, data := range refs {
		if err := each(blob.Info{Ref: ref, Size: int64(len(data))}); err != nil {
			return err
		}
	}
	return nil
}

func (m *memBlobs) Owns(ref string) bool { return strings.HasPrefix(ref, memPrefix) }
func (m *memBlobs) Close() error         { return nil }

func (m *memBlobs) get(ref string) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.blobs[ref]
}

func (m *memBlobs) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.blobs)
}

// decoderServer is a server with what the decoder uses: blobs (nil for
// none) and bodies over threshold moved there.
func decoderServer(blobs blob.Store, threshold int64) *server {
	s := &server{maxBody: 1 << 16, maxLarge: 1 << 20, blobs: blobs, threshold: threshold,
		defaultRefs: []string{"s3://bucket/ok/"}}
	if blobs != nil {
		s.ownRefs = ownRefPrefix(blobs)
	}
	return s
}

// same checks that decodeTask reads body as parseTask does: the same
// refusal (status and code), or, once settled, the same task with the
// same hash, its body in the same place.
func same(t *testing.T, s *server, mem *memBlobs, body string, oneByte bool) {
	t.Helper()
	ctx := context.Background()
	now := time.UnixMilli(1_750_000_000_000)
	rule := s.bodyRefRule(DefaultTenant)
	want, werr := parseTask([]byte(body), now, rule)
	var r io.Reader = strings.NewReader(body)
	if oneByte {
		r = iotest.OneByteReader(r)
	}
	blobsBefore := 0
	if mem != nil {
		blobsBefore = mem.count()
	}
	got, gerr := s.decodeTask(ctx, r, 1<<20, now, rule)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%q: parseTask says %v, decodeTask says %v", body, werr, gerr)
	}
	if werr != nil {
		we, _ := errors.AsType[*APIError](werr)
		ge, _ := errors.AsType[*APIError](gerr)
		if we == nil || ge == nil || we.Status != ge.Status || we.Code != ge.Code {
			t.Fatalf("%q: parseTask refuses with %v, decodeTask with %v", body, werr, gerr)
		}
		if mem != nil && mem.count() != blobsBefore {
			t.Fatalf("%q: refused, yet the blob store went from %d to %d blobs", body, blobsBefore, mem.count())
		}
		return
	}
	if err := s.settleBody(ctx, want); err != nil {
		t.Fatal(err)
	}
	if err := s.settleBody(ctx, got); err != nil {
		t.Fatal(err)
	}
	describe := func(q *taskRequest) string {
		body := q.body
		if q.moved != nil {
			body = mem.get(q.moved.Ref)
			if int64(len(body)) != q.moved.Size || q.body != nil {
				t.Fatalf("%q: moved body of %d bytes, %d in the store, %d held", body, q.moved.Size, len(body), len(q.body))
			}
		}
		return fmt.Sprintf("url=%q method=%q headers=%v body=%q (nil %t) binary=%t ref=%q moved=%t policy=%q key=%q nb=%v hash=%s",
			q.targetURL, q.method, q.headers, body, body == nil, q.binary, q.bodyRef, q.moved != nil,
			q.policyID, q.key, fmtPtr(q.notBefore), q.hash())
	}
	if w, g := describe(want), describe(got); w != g {
		t.Fatalf("%q:\nparseTask:  %s\ndecodeTask: %s", body, w, g)
	}
}

func fmtPtr(p *int64) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}

var decodeSeeds = []string{
	`{"targetUrl":"http://example.com/","policyId":"p"}`,
	`{"targetUrl":"http://h/","policyId":"p","body":"hello, world: a body long enough to be moved"}`,
	`{"body":"\u00e9\ud83d\ude00\n\t\"\\\/\b\f\r x \u0000 é😀","targetUrl":"http://h/","policyId":"p"}`,
	`{"targetUrl":"http://h/","policyId":"p","bodyBase64":"aGVsbG8sIHdvcmxkOiBhIGJvZHkgbG9uZyBlbm91Z2g="}`,
	`{"targetUrl":"http://h/","policyId":"p","bodyBase64":"aGVs\nbG8=\r\n"}`,
	`{"targetUrl":"http://h/","policyId":"p","bodyBase64":"aGVsbG8=aGVs"}`,
	`{"targetUrl":"http://h/","policyId":"p","bodyBase64":"aGVsbG9="}`,
	`{"targetUrl":"http://h/","policyId":"p","bodyBase64":"aGVsbG\u0038="}`,
	`{"targetUrl":"http://h/","policyId":"p","body":""}`,
	`{"targetUrl":"http://h/","policyId":"p","bodyBase64":""}`,
	`{"targetUrl":"http://h/","policyId":"p","body":null}`,
	`{"targetUrl":"http://h/","policyId":"p","body":5}`,
	`{"targetUrl":"http://h/","policyId":"p","body":"abc","bodyBase64":"YQ=="}`,
	`{"targetUrl":"http://h/","policyId":"p","body":"abc","body":"abd"}`,
	`{"targetUrl":"http://h/","policyId":"p","body":null,"body":"abd"}`,
	`{"targetUrl":"http://h/","policyId":"p","bodyRef":"s3://bucket/ok/key"}`,
	`{"targetUrl":"http://h/","policyId":"p","bodyRef":"s3://bucket/other/key"}`,
	`{"targetUrl":"http://h/","policyId":"p","bodyRef":"s3://bucket/ok/../key"}`,
	`{"targetUrl":"http://h/","policyId":"p","bodyRef":"blob:sha256:00"}`,
	`{"targetUrl":"http://h/","policyId":"p","bodyRef":"s3://bucket/ok/k","body":"x"}`,
	`{"targetUrl":"http://h/","policyId":"p","body":"\ud800"}`,
	`{"targetUrl":"http://h/","policyId":"p","body":"\ud800\u0041"}`,
	`{"targetUrl":"http://h/","policyId":"p","body":"\udc00\ud800"}`,
	`{"targetUrl":"http://h/","policyId":"p","body":"\ud800\uzzzz"}`,
	`{"targetUrl":"http://h/","policyId":"p","body":"\x"}`,
	"{\"targetUrl\":\"http://h/\",\"policyId\":\"p\",\"body\":\"a\xffb\"}",
	"{\"targetUrl\":\"http://h/\",\"policyId\":\"p\",\"body\":\"a\xe2\x82\"}",
	"{\"targetUrl\":\"http://h/\",\"policyId\":\"p\",\"body\":\"a\nb\"}",
	`{"targetUrl":"http://h/","policyId":"p","body":"abc`,
	`{"targetUrl":"http://h/","policyId":"p","body":"abc"`,
	`{"targetUrl":"http://h/","policyId":"p","body":"abc"} x`,
	`{"targetUrl":"http://h/","policyId":"p","body":"abc"}{}`,
	`{"targetUrl":"http://h/","policyId":"p",}`,
	`{"targetUrl":"http://h/" "policyId":"p"}`,
	`{"targetUrl":"http://h/","policyId":"p","headers":{"X-A":"1","x-b":"\u00e9"},"method":"put","idempotencyKey":"k","notBefore":1750000000000.0}`,
	`{"targetUrl":"http://h/","policyId":"p","headers":{"X":"1","X":"2"}}`,
	`{"targetUrl":"http://h/","policyId":"p","extra":[1,{"a":"}]"},"\""],"body":"x"}`,
	`{"targetUrl":"http://h/","policyId":"p","x":[}`,
	`{"b\u006fdy":"escaped key","targetUrl":"http://h/","policyId":"p"}`,
	`{"\ud800":1,"\udc00":2}`,
	` {} `, `{}`, `[]`, `null`, ``, ` `, `{`, `"x"`, `{"a":1 2}`, `{"a":tru}`, `{"a":}`,
}

// FuzzDecodeTask holds the stream decoder of POST /retry-tasks to the
// in-memory parser of a batch's tasks: for any body, at any threshold, read
// whole or a byte at a time, the same refusal or the same task with the same
// hash, its body in the same place; and a refused request leaves no blob.
func FuzzDecodeTask(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add(s, uint8(0), false)
		f.Add(s, uint8(4), true)
		f.Add(s, uint8(16), false)
	}
	f.Fuzz(func(t *testing.T, body string, threshold uint8, oneByte bool) {
		var mem *memBlobs
		var s *server
		if threshold == 0 {
			s = decoderServer(nil, 0)
		} else {
			mem = newMemBlobs()
			s = decoderServer(mem, int64(threshold))
		}
		same(t, s, mem, body, oneByte)
	})
}

// Bodies longer than the decoder's buffer, the base64 decoder's chunk and
// hashInlineMax, cut at every kind of place, decode as in memory.
func TestDecodeTaskLong(t *testing.T) {
	t.Parallel()
	mem := newMemBlobs()
	long := strings.Repeat("ab\\n\\u00e9é😀\\ud83d\\ude00\\\"", 40000) // ~1.3 MB of JSON
	b64 := strings.Repeat("QUJD", hashInlineMax/3+5000) + "QQ=="
	for _, body := range []string{
		`{"targetUrl":"http://h/","policyId":"p","body":"` + long + `"}`,
		`{"body":"` + long + `","targetUrl":"http://h/","policyId":"p"}`,
		`{"targetUrl":"http://h/","policyId":"p","bodyBase64":"` + b64 + `"}`,
		`{"targetUrl":"http://h/","policyId":"p","bodyBase64":"` + b64 + `A"}`,
		`{"targetUrl":"http://h/","policyId":"p","bodyBase64":"` + strings.Repeat("QUJD", 3000) + "\\r\\n" + strings.Repeat("QUJD", 3000) + `"}`,
		`{"targetUrl":"http://h/","policyId":"p","body":"` + long + `\ud800"}`,
		`{"targetUrl":"http://h/","policyId":"p","body":"` + long + `","bodyBase64":"` + b64 + `"}`,
	} {
		for _, threshold := range []int64{1, 64 << 10, hashInlineMax, 1 << 30} {
			same(t, decoderServer(mem, threshold), mem, body, false)
		}
		same(t, decoderServer(nil, 0), nil, body, false)
	}
}

// A blob store that fails while the body streams is a 503, and the task is
// not made.
func TestDecodeTaskBlobFailure(t *testing.T) {
	t.Parallel()
	mem := newMemBlobs()
	mem.fail = errors.New("disk full")
	s := decoderServer(mem, 8)
	body := `{"targetUrl":"http://h/","policyId":"p","body":"` + strings.Repeat("x", 200<<10) + `"}`
	_, err := s.decodeTask(context.Background(), strings.NewReader(body), 1<<20, time.Now(), s.bodyRefRule(DefaultTenant))
	if e, ok := errors.AsType[*APIError](err); !ok || e.Status != 503 || !errors.Is(err, mem.fail) {
		t.Fatalf("decodeTask = %v, want a 503 caused by the blob store's error", err)
	}
}

// s3Like is a blob store whose references are package s3's.
type s3Like struct{ *memBlobs }

func (s3Like) Ref(sum [32]byte) string {
	return "s3://retryd-bucket/blobs/sha256/" + hex.EncodeToString(sum[:])
}

// No bodyRef may name retryd's own blobs, under the prefix its S3 store
// keeps them in, even where a tenant's allow-list would take it.
func TestOwnBlobsAreNoBodyRefs(t *testing.T) {
	t.Parallel()
	s := decoderServer(s3Like{newMemBlobs()}, 8)
	s.defaultRefs = []string{"s3://retryd-bucket/"}
	rule := s.bodyRefRule(DefaultTenant)
	for ref, ok := range map[string]bool{
		"s3://retryd-bucket/blobs/sha256/" + strings.Repeat("ab", 32): false,
		"s3://retryd-bucket/blobs/other":                              false,
		"s3://retryd-bucket/blobsx/y":                                 true,
		"s3://retryd-bucket/other/x":                                  true,
		"blob:sha256:" + strings.Repeat("ab", 32):                     false,
	} {
		if why := rule(ref); (why == "") != ok {
			t.Errorf("%s: %q, want accepted %t", ref, why, ok)
		}
	}
}
