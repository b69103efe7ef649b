package dispatch_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/service/blob"
	"github.com/retrykit/retry/service/blob/disk"
	"github.com/retrykit/retry/service/dispatch"
)

// bigBody is the size of the large bodies: 20 MB.
const bigBody = 20 << 20

// bodyBytes yields n pseudo-random bytes of seed, without holding them.
func bodyBytes(seed uint64, n int64) io.Reader {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	return io.LimitReader(rand.NewChaCha8(s), n)
}

// putBody puts n bytes of seed in bs.
func putBody(t testing.TB, bs blob.Store, seed uint64, n int64) blob.Blob {
	t.Helper()
	b, err := bs.Put(context.Background(), bodyBytes(seed, n))
	if err != nil {
		t.Fatal(err)
	}
	if b.Size != n {
		t.Fatalf("Put stored %d bytes, want %d", b.Size, n)
	}
	return b
}

func diskStore(t testing.TB) (*disk.Store, string) {
	t.Helper()
	dir := t.TempDir()
	st, err := disk.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, dir
}

// received is what a hashing target saw of one request.
type received struct {
	length int64    // its Content-Length
	n      int64    // the bytes of its body read
	sum    [32]byte // their SHA-256
	err    error    // how reading the body ended, when not at its end
}

// hashTarget is a target on 127.0.0.1 that hashes each request's body as
// it reads it, keeping nothing else, and answers the next status of its
// script (the last one repeating).
type hashTarget struct {
	*httptest.Server
	mu     sync.Mutex
	script []int
	got    []received
	conns  atomic.Int32 // connections accepted
	// before, when set, runs between the first MiB of a body and the rest.
	before func()
}

func newHashTarget(t testing.TB, script ...int) *hashTarget {
	t.Helper()
	tg := &hashTarget{script: script}
	tg.Server = httptest.NewUnstartedServer(http.HandlerFunc(tg.serve))
	tg.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			tg.conns.Add(1)
		}
	}
	tg.Start()
	t.Cleanup(tg.Close)
	return tg
}

func (tg *hashTarget) serve(w http.ResponseWriter, r *http.Request) {
	h := sha256.New()
	rec := received{length: r.ContentLength}
	var err error
	if tg.before != nil {
		rec.n, err = io.CopyN(h, r.Body, 1<<20)
		if err == nil {
			tg.before()
		}
	}
	if err == nil {
		var m int64
		m, err = io.Copy(h, r.Body)
		rec.n += m
	}
	rec.err = err
	h.Sum(rec.sum[:0])
	tg.mu.Lock()
	status := tg.script[min(len(tg.got), len(tg.script)-1)]
	tg.got = append(tg.got, rec)
	tg.mu.Unlock()
	if err != nil {
		return
	}
	w.WriteHeader(status)
}

func (tg *hashTarget) seen() []received {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return append([]received(nil), tg.got...)
}

func bodyDispatcher(t testing.TB, bs blob.Store) *dispatch.Dispatcher {
	t.Helper()
	var cfg dispatch.Config
	cfg.Guard, cfg.Timeout = loopback, 2*time.Minute
	if bs != nil {
		cfg.Blobs = bs
	}
	d := dispatch.New(cfg)
	t.Cleanup(d.Close)
	return d
}

// checkSameBodyEveryAttempt sends the body b of bs twice, to a target that
// answers 503 then 200, and checks that each attempt delivered all of it.
func checkSameBodyEveryAttempt(t *testing.T, bs blob.Store, b blob.Blob) {
	t.Helper()
	tg := newHashTarget(t, 503, 200)
	d := bodyDispatcher(t, bs)
	req := dispatch.Request{Method: "POST", URL: tg.URL + "/big", BodyRef: b.Ref, IdempotencyKey: "k"}
	for i, want := range []int{503, 200} {
		res := d.Send(context.Background(), req)
		if res.Err != nil || res.Status != want {
			t.Fatalf("attempt %d: Send = %d, %v; want %d", i+1, res.Status, res.Err, want)
		}
	}
	got := tg.seen()
	if len(got) != 2 {
		t.Fatalf("target saw %d requests, want 2", len(got))
	}
	for i, g := range got {
		if g.err != nil || g.length != b.Size || g.n != b.Size || g.sum != b.SHA256 {
			t.Errorf("attempt %d: target got Content-Length %d, %d bytes (err %v), sha256 %x; want %d bytes, sha256 %x",
				i+1, g.length, g.n, g.err, g.sum[:6], b.Size, b.SHA256[:6])
		}
	}
}

// A 20 MB body in the embedded blob store reaches the target whole, with
// its Content-Length, at every attempt.
func TestBodyRefDeliveredOnEveryAttempt(t *testing.T) {
	t.Parallel()
	bs, _ := diskStore(t)
	checkSameBodyEveryAttempt(t, bs, putBody(t, bs, 1, bigBody))
}

// Small bodies by reference (written with the head, not concurrently) and
// an empty one.
func TestBodyRefSmall(t *testing.T) {
	t.Parallel()
	bs, _ := diskStore(t)
	for _, n := range []int64{0, 1, 8 << 10, 8<<10 + 1} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			checkSameBodyEveryAttempt(t, bs, putBody(t, bs, uint64(n), n))
		})
	}
}

// A blob gone from the store is the attempt's error, retried by the
// policy, and nothing is sent.
func TestBodyRefNotFound(t *testing.T) {
	t.Parallel()
	bs, _ := diskStore(t)
	b := putBody(t, bs, 2, 1000)
	if err := bs.Delete(context.Background(), b.Ref); err != nil {
		t.Fatal(err)
	}
	tg := newHashTarget(t, 200)
	d := bodyDispatcher(t, bs)
	res := d.Send(context.Background(), dispatch.Request{Method: "POST", URL: tg.URL, BodyRef: b.Ref})
	if !errors.Is(res.Err, blob.ErrNotFound) || res.Status != 0 {
		t.Fatalf("Send = %d, %v; want an error wrapping blob.ErrNotFound", res.Status, res.Err)
	}
	if msg, want := res.Message(), "body: blob not found: "+b.Ref; msg != want {
		t.Errorf("Message = %q, want %q", msg, want)
	}
	if o := res.Outcome(&retry.Policy{}); o != dispatch.Retry {
		t.Errorf("Outcome = %v, want retry", o)
	}
	if n := len(tg.seen()); n != 0 || tg.conns.Load() != 0 {
		t.Errorf("target saw %d requests on %d connections, want none", n, tg.conns.Load())
	}
}

// Without a blob store, a body by reference is the attempt's error.
func TestBodyRefWithoutBlobStore(t *testing.T) {
	t.Parallel()
	tg := newHashTarget(t, 200)
	d := bodyDispatcher(t, nil)
	ref := "blob:sha256:" + strings.Repeat("ab", 32)
	res := d.Send(context.Background(), dispatch.Request{Method: "POST", URL: tg.URL, BodyRef: ref})
	if !errors.Is(res.Err, dispatch.ErrNoBlobStore) {
		t.Fatalf("Send = %d, %v; want an error wrapping ErrNoBlobStore", res.Status, res.Err)
	}
	if msg, want := res.Message(), "body "+ref+": no blob store to read it from"; msg != want {
		t.Errorf("Message = %q, want %q", msg, want)
	}
	if o := res.Outcome(&retry.Policy{}); o != dispatch.Retry {
		t.Errorf("Outcome = %v, want retry", o)
	}
	if n := len(tg.seen()); n != 0 {
		t.Errorf("target saw %d requests, want none", n)
	}
}

// A request with a body and a body reference cannot be sent.
func TestBodyAndBodyRef(t *testing.T) {
	t.Parallel()
	bs, _ := diskStore(t)
	d := bodyDispatcher(t, bs)
	res := d.Send(context.Background(), dispatch.Request{Method: "POST", URL: "http://127.0.0.1:1/", Body: []byte("x"),
		BodyRef: putBody(t, bs, 3, 10).Ref})
	if !errors.Is(res.Err, dispatch.ErrBadRequest) || res.Outcome(&retry.Policy{}) != dispatch.Fail {
		t.Fatalf("Send = %v; want ErrBadRequest, failed", res.Err)
	}
}

// corrupt changes one byte of the embedded store's file of b, at off.
func corrupt(t *testing.T, dir string, b blob.Blob, off int64) {
	t.Helper()
	var path string
	err := filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err == nil && e.Name() == b.Hex() {
			path = p
		}
		return err
	})
	if err != nil || path == "" {
		t.Fatalf("no file of %s under %s (%v)", b.Ref, dir, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var c [1]byte
	if _, err := f.ReadAt(c[:], off); err != nil {
		t.Fatal(err)
	}
	c[0] ^= 0xff
	if _, err := f.WriteAt(c[:], off); err != nil {
		t.Fatal(err)
	}
}

// A blob found corrupt as it is sent leaves its request half sent: the
// attempt fails with the blob store's error at once, rather than wait for
// an answer that cannot come, and the connection is closed, not reused.
func TestBodyRefCorruptMidway(t *testing.T) {
	t.Parallel()
	for _, n := range []int64{4 << 10, 4 << 20} { // written with the head; concurrently
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			bs, dir := diskStore(t)
			b := putBody(t, bs, 4, n)
			corrupt(t, dir, b, 100)
			tg := newHashTarget(t, 200)
			d := bodyDispatcher(t, bs)
			// A first request leaves a connection idle, for the corrupt one
			// to reuse.
			if res := d.Send(context.Background(), dispatch.Request{Method: "POST", URL: tg.URL, Body: []byte("ok")}); res.Status != 200 {
				t.Fatalf("first Send = %d, %v", res.Status, res.Err)
			}
			start := time.Now()
			res := d.Send(context.Background(), dispatch.Request{Method: "POST", URL: tg.URL, BodyRef: b.Ref})
			if !errors.Is(res.Err, blob.ErrCorrupt) || res.Status != 0 {
				t.Fatalf("Send = %d, %v; want an error wrapping blob.ErrCorrupt", res.Status, res.Err)
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("Send took %v: it waited for an answer to a half-sent request", took)
			}
			if msg := res.Message(); !strings.HasPrefix(msg, "body (") || !strings.Contains(msg, b.Ref) {
				t.Errorf("Message = %q, want the body's error naming %s", msg, b.Ref)
			}
			if o := res.Outcome(&retry.Policy{}); o != dispatch.Retry {
				t.Errorf("Outcome = %v, want retry", o)
			}
			// The target saw a body cut short, never a whole one (or, when
			// the body fails on its first read, nothing: the head is still
			// in the buffer).
			if n > 64<<10 {
				waitFor(t, func() bool { return len(tg.seen()) == 2 })
			}
			if got := tg.seen(); len(got) > 1 && (got[1].err == nil || got[1].n >= n) {
				t.Errorf("target read %d of %d bytes, err %v; want a body cut short", got[1].n, n, got[1].err)
			}
			// The next request goes out on a new connection.
			if res := d.Send(context.Background(), dispatch.Request{Method: "POST", URL: tg.URL, Body: []byte("ok")}); res.Status != 200 {
				t.Fatalf("last Send = %d, %v", res.Status, res.Err)
			}
			if c := tg.conns.Load(); c != 2 {
				t.Errorf("target accepted %d connections, want 2 (the half-sent request's is not reused)", c)
			}
		})
	}
}

// An attempt cancelled while its body streams ends at once, with the
// context's error, and its connection is closed.
func TestBodyRefCancelledMidway(t *testing.T) {
	t.Parallel()
	bs, _ := diskStore(t)
	b := putBody(t, bs, 5, bigBody)
	tg := newHashTarget(t, 200)
	reading := make(chan struct{})
	release := make(chan struct{})
	tg.before = func() { // the target stops reading after 1 MiB
		close(reading)
		<-release
	}
	t.Cleanup(func() { close(release) })
	d := bodyDispatcher(t, bs)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-reading
		cancel()
	}()
	res := d.Send(ctx, dispatch.Request{Method: "POST", URL: tg.URL, BodyRef: b.Ref})
	if !errors.Is(res.Err, context.Canceled) || res.Err.Error() != context.Canceled.Error() {
		t.Fatalf("Send = %d, %v; want context.Canceled", res.Status, res.Err)
	}
	if res.Duration > 10*time.Second {
		t.Errorf("Send took %v after the cancellation", res.Duration)
	}
}

// A body that cannot be read past its start: a reader failing after some
// bytes, as a store does on a network error.
type failingStore struct {
	blob.Store
	after int64
}

func (f failingStore) Open(ctx context.Context, ref string) (io.ReadCloser, int64, error) {
	r, n, err := f.Store.Open(ctx, ref)
	if err != nil {
		return nil, 0, err
	}
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(io.LimitReader(r, f.after), errReader{}), r}, n, nil
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) {
	return 0, errors.New("connection reset by the blob store")
}

func TestBodyRefReaderFailsMidway(t *testing.T) {
	t.Parallel()
	bs, _ := diskStore(t)
	b := putBody(t, bs, 6, 1<<20)
	tg := newHashTarget(t, 200)
	d := bodyDispatcher(t, failingStore{bs, 300 << 10})
	res := d.Send(context.Background(), dispatch.Request{Method: "POST", URL: tg.URL, BodyRef: b.Ref})
	want := fmt.Sprintf("body %s (%d of %d bytes sent): connection reset by the blob store", b.Ref, 300<<10, 1<<20)
	if res.Message() != want || res.Status != 0 {
		t.Fatalf("Send = %d, %q; want %q", res.Status, res.Message(), want)
	}
}

// A blob store that yields fewer bytes than the size it gave.
type shortStore struct{ blob.Store }

func (s shortStore) Open(ctx context.Context, ref string) (io.ReadCloser, int64, error) {
	r, n, err := s.Store.Open(ctx, ref)
	return r, n + 10, err
}

func TestBodyRefShorterThanAnnounced(t *testing.T) {
	t.Parallel()
	bs, _ := diskStore(t)
	b := putBody(t, bs, 7, 64<<10)
	tg := newHashTarget(t, 200)
	d := bodyDispatcher(t, shortStore{bs})
	res := d.Send(context.Background(), dispatch.Request{Method: "POST", URL: tg.URL, BodyRef: b.Ref})
	if res.Err == nil || !strings.HasPrefix(res.Message(), "body") || res.Status != 0 {
		t.Fatalf("Send = %d, %v; want the body's error", res.Status, res.Err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met after 10s")
		}
	}
}

// Many attempts streaming 20 MB bodies at once hold a few buffers each,
// not their bodies: heap in use stays far below what one body each would
// take. The target holds every attempt after the first MiB of its body
// until all of them are there, so that all stream at once.
func TestBodyRefMemoryBounded(t *testing.T) {
	n := 32
	if testing.Short() {
		n = 16
	}
	bs, _ := diskStore(t)
	checkMemoryBounded(t, bs, n)
}

// checkMemoryBounded streams a 20 MB body of bs to n attempts at once and
// checks how much the heap in use grew meanwhile. It must not run beside
// other tests.
func checkMemoryBounded(t *testing.T, bs blob.Store, n int) {
	b := putBody(t, bs, 8, bigBody)
	tg := newHashTarget(t, 200)
	var arrived sync.WaitGroup
	arrived.Add(n)
	all := make(chan struct{})
	go func() { arrived.Wait(); close(all) }()
	tg.before = func() {
		arrived.Done()
		select {
		case <-all:
		case <-time.After(time.Minute):
		}
	}
	d := bodyDispatcher(t, bs)

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak atomic.Uint64
	sample := func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		for p := peak.Load(); ms.HeapInuse > p && !peak.CompareAndSwap(p, ms.HeapInuse); p = peak.Load() {
		}
	}
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				sample()
			}
		}
	}()

	var wg sync.WaitGroup
	results := make([]dispatch.Result, n)
	for i := range n {
		wg.Go(func() {
			results[i] = d.Send(context.Background(), dispatch.Request{Method: "POST", URL: tg.URL, BodyRef: b.Ref})
		})
	}
	select {
	case <-all:
		sample() // every attempt is streaming its body
	case <-time.After(time.Minute):
		t.Error("the attempts did not all stream at once")
	}
	wg.Wait()
	close(stop)
	<-sampled

	for i, res := range results {
		if res.Err != nil || res.Status != 200 {
			t.Errorf("attempt %d: %d, %v", i, res.Status, res.Err)
		}
	}
	for i, g := range tg.seen() {
		if g.err != nil || g.n != b.Size || g.sum != b.SHA256 {
			t.Errorf("request %d: target got %d bytes, err %v, not the body", i, g.n, g.err)
		}
	}
	grew := int64(peak.Load()) - int64(base)
	// Each attempt: its chunk buffer, fasthttp's read and write buffers,
	// the target's connection; and slack for the rest of the test.
	limit := int64(n)*256<<10 + 16<<20
	t.Logf("%d attempts of %d MiB bodies at once: heap in use grew by %.1f MiB at most (%.0f KiB an attempt); limit %.0f MiB, bodies %d MiB",
		n, bigBody>>20, float64(grew)/(1<<20), float64(grew)/float64(n)/1024, float64(limit)/(1<<20), n*bigBody>>20)
	if grew > limit {
		t.Errorf("heap in use grew by %d MiB streaming %d bodies: more than %d MiB", grew>>20, n, limit>>20)
	}
}

// staleTarget answers every request but the second on its first
// connection, on which it hangs up with the body unread; it hashes the
// bodies it reads.
func staleTarget(t *testing.T) (url string, seen func() []received) {
	var (
		mu  sync.Mutex
		got []received
	)
	url = serveTCP(t, func(c net.Conn, conn int) {
		br := bufio.NewReader(c)
		for i := 1; ; i++ {
			req, err := http.ReadRequest(br)
			if err != nil || conn == 1 && i == 2 {
				return
			}
			h := sha256.New()
			rec := received{length: req.ContentLength}
			rec.n, rec.err = io.Copy(h, req.Body)
			h.Sum(rec.sum[:0])
			mu.Lock()
			got = append(got, rec)
			mu.Unlock()
			if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"); err != nil {
				return
			}
		}
	})
	return url, func() []received {
		mu.Lock()
		defer mu.Unlock()
		return append([]received(nil), got...)
	}
}

// A request sent again on a new connection, after the pooled one it went
// out on was closed before any answer (a replayable request: it carries an
// idempotency key), goes out whole: a body by reference is read afresh
// from its start. A large body's write, cut short when the read failed,
// does not hide that the target closed the connection.
func TestBodyResentAfterAStaleConnection(t *testing.T) {
	t.Parallel()
	bs, _ := diskStore(t)
	for _, tc := range []struct {
		name   string
		n      int64
		inline bool
	}{{"ref-4KiB", 4 << 10, false}, {"ref-4MiB", 4 << 20, false}, {"inline-4MiB", 4 << 20, true}} {
		t.Run(tc.name, func(t *testing.T) {
			b := putBody(t, bs, 9+uint64(tc.n), tc.n)
			url, seen := staleTarget(t)
			d := bodyDispatcher(t, bs)
			req := dispatch.Request{Method: "POST", URL: url, BodyRef: b.Ref, IdempotencyKey: "k"}
			if tc.inline {
				body, err := io.ReadAll(bodyBytes(9+uint64(tc.n), tc.n))
				if err != nil {
					t.Fatal(err)
				}
				req.Body, req.BodyRef = body, ""
			}
			for i := range 2 {
				if res := d.Send(context.Background(), req); res.Err != nil || res.Status != 200 {
					t.Fatalf("Send %d = %d, %v", i+1, res.Status, res.Err)
				}
			}
			got := seen()
			if len(got) != 2 {
				t.Fatalf("target read %d whole requests, want 2", len(got))
			}
			for i, g := range got {
				if g.err != nil || g.length != tc.n || g.n != tc.n || g.sum != b.SHA256 {
					t.Errorf("request %d: Content-Length %d, %d bytes (err %v), not the body", i+1, g.length, g.n, g.err)
				}
			}
		})
	}
}
