package blobtest

import (
	"context"
	"errors"
	"io"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry/service/blob"
)

// testMemory: Put and Open stream a body; neither allocates its size.
func testMemory(t *testing.T, newStore NewStore) {
	s := setup(t, newStore)
	const n = 32 << 20
	allocated := func(f func()) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	var b blob.Blob
	if a := allocated(func() { b = put(t, s, 1, n) }); a > n/4 {
		t.Errorf("Put of %d MiB allocated %d MiB, want less than %d", n>>20, a>>20, n>>22)
	}
	if a := allocated(func() { check(t, s, b) }); a > n/4 {
		t.Errorf("Open and reading %d MiB allocated %d MiB, want less than %d", n>>20, a>>20, n>>22)
	}
}

// testRoundTrip: what Put stores reads back byte for byte, whatever its size,
// and Put leaves its reader open.
func testRoundTrip(t *testing.T, s blob.Store) {
	for i, n := range []int64{0, 1, 64 << 10, 64<<10 + 1, 20_000_000} {
		t.Run(describe(n), func(t *testing.T) {
			b := put(t, s, uint64(100+i), n)
			check(t, s, b)
			check(t, s, b) // and again, as at each attempt
		})
	}
	closed := &closeRecorder{Reader: body(7, 10)}
	if _, err := s.Put(context.Background(), closed); err != nil || closed.closed {
		t.Errorf("Put of an io.ReadCloser = %v, closed it %v; want nil, not closed", err, closed.closed)
	}
}

type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

// testSameBytesSameRef: a blob is named after its bytes.
func testSameBytesSameRef(t *testing.T, s blob.Store) {
	a1 := put(t, s, 1, 1000)
	a2 := put(t, s, 1, 1000)
	b := put(t, s, 2, 1000)
	if a1 != a2 {
		t.Errorf("the same bytes put twice = %+v and %+v, want the same", a1, a2)
	}
	if b.Ref == a1.Ref {
		t.Errorf("other bytes have the same reference %s", b.Ref)
	}
	check(t, s, a1)
	check(t, s, b)
	wantList(t, s, a1, b)
}

// testOpenMissing: a reference of the store's form to bytes never put.
func testOpenMissing(t *testing.T, s blob.Store) {
	a := put(t, s, 1, 10)
	missing := withSum(a.Ref, sumOf(2, 10))
	if !s.Owns(missing) {
		t.Fatalf("Owns(%s) = false, want true (a reference of the store's own form)", missing)
	}
	wantMissing(t, s, missing)
	if err := s.Delete(context.Background(), missing); err != nil {
		t.Errorf("Delete(%s) of a missing blob = %v, want nil", missing, err)
	}
	check(t, s, a)
}

// testDelete: a deleted blob is gone, deleting it again is no error, and
// putting its bytes again brings it back.
func testDelete(t *testing.T, s blob.Store) {
	ctx := context.Background()
	a, b := put(t, s, 1, 100<<10), put(t, s, 2, 100<<10)
	if err := s.Delete(ctx, a.Ref); err != nil {
		t.Fatalf("Delete(%s) = %v", a.Ref, err)
	}
	wantMissing(t, s, a.Ref)
	wantList(t, s, b)
	check(t, s, b)
	if err := s.Delete(ctx, a.Ref); err != nil {
		t.Errorf("second Delete(%s) = %v, want nil", a.Ref, err)
	}
	if again := put(t, s, 1, 100<<10); again != a {
		t.Errorf("Put after Delete = %+v, want %+v", again, a)
	}
	check(t, s, a)
	wantList(t, s, a, b)
}

// testList: List gives every blob put, with its size and a time of its Put.
func testList(t *testing.T, s blob.Store) {
	if got := list(t, s); len(got) != 0 {
		t.Fatalf("a new store lists %d blobs, want none", len(got))
	}
	start := time.Now()
	var bs []blob.Blob
	for i, n := range []int64{0, 1, 5000, 300 << 10} {
		bs = append(bs, put(t, s, uint64(i), n))
	}
	end := time.Now()
	for ref, in := range wantList(t, s, bs...) {
		if !within(in.PutAt, start, end) {
			t.Errorf("List gave %s put at %v, want between %v and %v", ref, in.PutAt, start, end)
		}
	}
}

// testListStops: an error of each ends List, which returns it.
func testListStops(t *testing.T, s blob.Store) {
	for i := range 3 {
		put(t, s, uint64(i), 10)
	}
	stop := errors.New("stop")
	calls := 0
	err := s.List(context.Background(), func(blob.Info) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Errorf("List whose each fails = %v after %d calls, want that error after 1", err, calls)
	}
}

// testListDeleting: each may delete what it is given, as a sweep does.
func testListDeleting(t *testing.T, s blob.Store) {
	var bs []blob.Blob
	for i := range 20 {
		bs = append(bs, put(t, s, uint64(i), 10))
	}
	keep := bs[7]
	err := s.List(context.Background(), func(in blob.Info) error {
		if in.Ref == keep.Ref {
			return nil
		}
		return s.Delete(context.Background(), in.Ref)
	})
	if err != nil {
		t.Fatalf("List deleting = %v", err)
	}
	wantList(t, s, keep)
	check(t, s, keep)
}

// testPutRenews: a Put of bytes already stored renews their time in List,
// so that a sweep's grace period runs from the latest Put.
func testPutRenews(t *testing.T, s blob.Store) {
	a := put(t, s, 1, 10)
	first := list(t, s)[a.Ref].PutAt
	time.Sleep(1100 * time.Millisecond) // S3 keeps times to the second
	put(t, s, 1, 10)
	if again := list(t, s)[a.Ref].PutAt; !again.After(first) {
		t.Errorf("after a second Put, List gives %s put at %v, want after the first Put's %v", a.Ref, again, first)
	}
}

// testConcurrentSame: Puts of the same bytes at once agree and leave one blob.
func testConcurrentSame(t *testing.T, s blob.Store) {
	const n = 8
	var bs [n]blob.Blob
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { bs[i] = put(t, s, 1, 1<<20) })
	}
	wg.Wait()
	for _, b := range bs[1:] {
		if b != bs[0] {
			t.Fatalf("concurrent Puts of the same bytes = %+v and %+v", bs[0], b)
		}
	}
	check(t, s, bs[0])
	wantList(t, s, bs[0])
}

// testConcurrentDifferent: Puts of different bytes at once, with reads.
func testConcurrentDifferent(t *testing.T, s blob.Store) {
	const n = 8
	var bs [n]blob.Blob
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			bs[i] = put(t, s, uint64(i), int64(i)*100<<10)
			check(t, s, bs[i])
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	wantList(t, s, bs[:]...)
}

// testReaderFails: a Put whose reader fails leaves nothing behind.
func testReaderFails(t *testing.T, s blob.Store) {
	template := put(t, s, 1, 10)
	boom := errors.New("boom")
	for _, n := range []int64{0, 200 << 10, 15_000_000} {
		t.Run(describe(n), func(t *testing.T) {
			r := io.MultiReader(body(2, n), &failing{boom})
			_, err := s.Put(context.Background(), r)
			if !errors.Is(err, boom) {
				t.Fatalf("Put whose reader fails after %d bytes = %v, want that error", n, err)
			}
			wantMissing(t, s, withSum(template.Ref, sumOf(2, n)))
		})
	}
	wantList(t, s, template)
}

type failing struct{ err error }

func (f *failing) Read([]byte) (int, error) { return 0, f.err }

// testCancel: a Put, an Open, a List of a done context fail with its error,
// and a Put whose context ends midway leaves nothing behind.
func testCancel(t *testing.T, s blob.Store) {
	a := put(t, s, 1, 10)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Put(done, body(2, 10)); !errors.Is(err, context.Canceled) {
		t.Errorf("Put(cancelled) = %v, want context.Canceled", err)
	}
	if r, _, err := s.Open(done, a.Ref); !errors.Is(err, context.Canceled) {
		if err == nil {
			r.Close()
		}
		t.Errorf("Open(cancelled) = %v, want context.Canceled", err)
	}
	if err := s.List(done, func(blob.Info) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("List(cancelled) = %v, want context.Canceled", err)
	}

	for _, n := range []int64{1 << 20, 15_000_000} {
		t.Run("midway/"+describe(n), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// The reader cancels once it has given n bytes, and goes on.
			r := io.MultiReader(body(3, n), &cancelling{cancel: cancel}, body(4, 1<<20))
			if _, err := s.Put(ctx, r); !errors.Is(err, context.Canceled) {
				t.Errorf("Put cancelled after %d bytes = %v, want context.Canceled", n, err)
			}
			wantMissing(t, s, withSum(a.Ref, sumOf(3, n)))
		})
	}
	wantList(t, s, a)
	check(t, s, a)
}

// cancelling calls cancel when it is read, then reads as empty.
type cancelling struct{ cancel func() }

func (c *cancelling) Read([]byte) (int, error) { c.cancel(); return 0, io.EOF }

// testCancelReading: the reader Open returns stops once its context is done.
func testCancelReading(t *testing.T, s blob.Store) {
	a := put(t, s, 1, 8<<20)
	ctx, cancel := context.WithCancel(context.Background())
	r, _, err := s.Open(ctx, a.Ref)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := io.ReadFull(r, make([]byte, 64<<10)); err != nil {
		t.Fatal(err)
	}
	cancel()
	if n, err := io.Copy(io.Discard, r); err == nil {
		t.Errorf("reading on after the context ended gave the %d bytes left and no error", n)
	}
}

// testBadRefs: references no store reads, and ones of the store's form
// that were tampered with, fail without touching the blobs.
func testBadRefs(t *testing.T, s blob.Store) {
	ctx := context.Background()
	a := put(t, s, 1, 10)
	h := a.Hex()
	for _, ref := range []string{
		"", "x", "blob:", "blob:sha256:", "blob:sha256:" + h[:63], "blob:sha256:" + h + "0",
		"blob:sha1:" + h[:40], "s3://", "s3://bucket", "s3:///key", "s3://bucket/", "/etc/passwd",
	} {
		if ref == a.Ref {
			continue
		}
		if s.Owns(ref) {
			t.Errorf("Owns(%q) = true", ref)
		}
		if r, _, err := s.Open(ctx, ref); !errors.Is(err, blob.ErrBadRef) {
			if err == nil {
				r.Close()
			}
			t.Errorf("Open(%q) = %v, want ErrBadRef", ref, err)
		}
		if err := s.Delete(ctx, ref); !errors.Is(err, blob.ErrBadRef) {
			t.Errorf("Delete(%q) = %v, want ErrBadRef", ref, err)
		}
	}
	// The store's own references with the hash spoiled: a store that reads
	// other objects (a caller's, say) may find no such object; none owns them.
	for _, ref := range []string{a.Ref[:len(a.Ref)-1], a.Ref + "0", a.Ref[:len(a.Ref)-1] + "G", withSum(a.Ref, [32]byte{}) + "/x"} {
		if s.Owns(ref) {
			t.Errorf("Owns(%q) = true", ref)
		}
		if r, _, err := s.Open(ctx, ref); !errors.Is(err, blob.ErrBadRef) && !errors.Is(err, blob.ErrNotFound) {
			if err == nil {
				r.Close()
			}
			t.Errorf("Open(%q) = %v, want ErrBadRef or ErrNotFound", ref, err)
		}
		if err := s.Delete(ctx, ref); !errors.Is(err, blob.ErrBadRef) && !errors.Is(err, blob.ErrNotOwned) {
			t.Errorf("Delete(%q) = %v, want ErrBadRef or ErrNotOwned", ref, err)
		}
	}
	wantList(t, s, a)
	check(t, s, a)
}

// testClose: after Close every method fails with ErrClosed, but Close.
func testClose(t *testing.T, s blob.Store) {
	ctx := context.Background()
	a := put(t, s, 1, 10)
	if err := s.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	calls := map[string]error{}
	_, calls["Put"] = s.Put(ctx, body(2, 10))
	_, _, calls["Open"] = s.Open(ctx, a.Ref)
	calls["Delete"] = s.Delete(ctx, a.Ref)
	calls["List"] = s.List(ctx, func(blob.Info) error { return nil })
	for name, err := range calls {
		if !errors.Is(err, blob.ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
	// setup's cleanup closes it a second time, which must return nil.
}
