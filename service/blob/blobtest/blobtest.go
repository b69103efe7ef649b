// Package blobtest is the conformance suite of blob.Store: every
// implementation runs Run, and a semantic of the interface is pinned here or
// nowhere.
//
//	func TestConformance(t *testing.T) {
//		blobtest.Run(t, func(t *testing.T) blob.Store {
//			s, err := myblobs.Open(…) // a new, empty store
//			if err != nil {
//				t.Fatal(err)
//			}
//			return s
//		})
//	}
//
// Run first checks, alone, that Put and Open do not hold a body in memory;
// the other tests then run in parallel, each on a store of its own, so
// newStore must be safe to call concurrently. Run closes each store when its
// test ends. The bodies are pseudo-random bytes, from 0 bytes to 20 MB, and
// are compared by their SHA-256.
package blobtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry/service/blob"
)

// NewStore makes a new, empty store for one test.
type NewStore func(t *testing.T) blob.Store

// Run runs every conformance test against stores made by newStore.
func Run(t *testing.T, newStore NewStore) {
	// Alone, so that the allocations it counts are its own.
	t.Run("Memory", func(t *testing.T) { testMemory(t, newStore) })
	tests := []struct {
		name string
		run  func(*testing.T, blob.Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"SameBytesSameRef", testSameBytesSameRef},
		{"OpenMissing", testOpenMissing},
		{"Delete", testDelete},
		{"List", testList},
		{"ListStops", testListStops},
		{"ListDeleting", testListDeleting},
		{"PutRenews", testPutRenews},
		{"ConcurrentSame", testConcurrentSame},
		{"ConcurrentDifferent", testConcurrentDifferent},
		{"ReaderFails", testReaderFails},
		{"Cancel", testCancel},
		{"CancelReading", testCancelReading},
		{"BadRefs", testBadRefs},
		{"Close", testClose},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.run(t, setup(t, newStore))
		})
	}
}

// setup returns a new store that is closed when t ends.
func setup(t *testing.T, newStore NewStore) blob.Store {
	t.Helper()
	s := newStore(t)
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
	})
	return s
}

// body returns a reader of n pseudo-random bytes that depend on seed only.
// It has no method but Read, so a Put cannot take a shortcut through
// io.WriterTo or a Seek.
func body(seed uint64, n int64) io.Reader {
	return onlyRead{io.LimitReader(rand.NewChaCha8(seedOf(seed)), n)}
}

type onlyRead struct{ r io.Reader }

func (o onlyRead) Read(p []byte) (int, error) { return o.r.Read(p) }

func seedOf(seed uint64) (s [32]byte) {
	for i := range 8 {
		s[i] = byte(seed >> (8 * i))
	}
	return s
}

// sumOf returns the SHA-256 of body(seed, n).
func sumOf(seed uint64, n int64) [32]byte {
	h := sha256.New()
	if _, err := io.Copy(h, body(seed, n)); err != nil {
		panic(err)
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// put puts body(seed, n) in s and checks the Blob it returns.
func put(t testing.TB, s blob.Store, seed uint64, n int64) blob.Blob {
	t.Helper()
	b, err := s.Put(context.Background(), body(seed, n))
	if err != nil {
		t.Fatalf("Put(%d bytes) = %v", n, err)
	}
	want := sumOf(seed, n)
	if b.Size != n || b.SHA256 != want || b.Hex() != hex.EncodeToString(want[:]) {
		t.Fatalf("Put(%d bytes) = size %d, SHA-256 %s; want %d, %x", n, b.Size, b.Hex(), n, want)
	}
	if !strings.HasSuffix(b.Ref, b.Hex()) || !s.Owns(b.Ref) {
		t.Fatalf("Put(%d bytes) = ref %q, not one of the store's own ending with the SHA-256 %s (Owns %v)",
			n, b.Ref, b.Hex(), s.Owns(b.Ref))
	}
	return b
}

// read reads ref back and returns the SHA-256 of what it read and its length.
func read(t testing.TB, s blob.Store, ref string) ([32]byte, int64) {
	t.Helper()
	var sum [32]byte
	r, size, err := s.Open(context.Background(), ref)
	if err != nil {
		t.Fatalf("Open(%s) = %v", ref, err)
	}
	defer r.Close()
	h := sha256.New()
	n, err := io.Copy(h, r)
	if err != nil {
		t.Fatalf("reading %s: %v", ref, err)
	}
	if n != size {
		t.Fatalf("Open(%s) announced %d bytes and gave %d", ref, size, n)
	}
	h.Sum(sum[:0])
	return sum, n
}

// check fails t unless ref reads back as b's bytes.
func check(t testing.TB, s blob.Store, b blob.Blob) {
	t.Helper()
	sum, n := read(t, s, b.Ref)
	if sum != b.SHA256 || n != b.Size {
		t.Fatalf("%s reads back as %d bytes of SHA-256 %x, want %d bytes of %s", b.Ref, n, sum, b.Size, b.Hex())
	}
}

// wantMissing fails t unless Open(ref) is ErrNotFound.
func wantMissing(t testing.TB, s blob.Store, ref string) {
	t.Helper()
	r, _, err := s.Open(context.Background(), ref)
	if err == nil {
		r.Close()
	}
	if !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("Open(%s) = %v, want ErrNotFound", ref, err)
	}
}

// list returns what List gives, by reference, failing t on a repeat.
func list(t testing.TB, s blob.Store) map[string]blob.Info {
	t.Helper()
	out := map[string]blob.Info{}
	err := s.List(context.Background(), func(in blob.Info) error {
		if _, ok := out[in.Ref]; ok {
			t.Errorf("List gave %s twice", in.Ref)
		}
		out[in.Ref] = in
		return nil
	})
	if err != nil {
		t.Fatalf("List = %v", err)
	}
	return out
}

// wantList fails t unless List gives exactly the blobs bs, with their sizes.
func wantList(t testing.TB, s blob.Store, bs ...blob.Blob) map[string]blob.Info {
	t.Helper()
	got := list(t, s)
	want := map[string]int64{}
	for _, b := range bs {
		want[b.Ref] = b.Size
	}
	for ref, in := range got {
		if size, ok := want[ref]; !ok {
			t.Errorf("List gave %s, which it should not", ref)
		} else if in.Size != size {
			t.Errorf("List gave %s of %d bytes, want %d", ref, in.Size, size)
		}
	}
	for ref := range want {
		if _, ok := got[ref]; !ok {
			t.Errorf("List did not give %s", ref)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return got
}

// withSum returns ref with the SHA-256 it ends with replaced by sum's: the
// reference the store would give those bytes.
func withSum(ref string, sum [32]byte) string {
	return ref[:len(ref)-64] + hex.EncodeToString(sum[:])
}

// slack is how far a store's clock and truncation may put a time.
const slack = 5 * time.Second

func within(got, from, to time.Time) bool {
	return !got.Before(from.Add(-slack)) && !got.After(to.Add(slack))
}

func describe(n int64) string {
	switch {
	case n >= 1e6 && n%1e6 == 0:
		return fmt.Sprintf("%dMB", n/1e6)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
