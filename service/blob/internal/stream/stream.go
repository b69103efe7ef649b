// Package stream holds what the blob stores share: copying a body while
// hashing it, and reading a blob back while checking it.
package stream

import (
	"context"
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
	"sync"

	"github.com/retrykit/retry/service/blob"
)

// BufferSize is the size of the buffer Copy moves the bytes through, and so
// the memory a Put holds for them.
const BufferSize = 128 << 10

var buffers = sync.Pool{New: func() any { b := make([]byte, BufferSize); return &b }}

// Copy copies r to w until io.EOF and returns the number of bytes and their
// SHA-256. It stops with ctx's error once ctx is done (checked before each
// read of r). An error of r or of w is returned wrapped, saying which.
func Copy(ctx context.Context, w io.Writer, r io.Reader) (n int64, sum [32]byte, err error) {
	bp := buffers.Get().(*[]byte)
	defer buffers.Put(bp)
	buf := *bp
	h := sha256.New()
	for {
		if err := ctx.Err(); err != nil {
			return n, sum, err
		}
		nr, rerr := r.Read(buf)
		if nr > 0 {
			h.Write(buf[:nr])
			nw, werr := w.Write(buf[:nr])
			n += int64(nw)
			if werr == nil && nw < nr {
				werr = io.ErrShortWrite
			}
			if werr != nil {
				return n, sum, fmt.Errorf("writing the blob: %w", werr)
			}
		}
		if rerr == io.EOF {
			h.Sum(sum[:0])
			return n, sum, nil
		}
		if rerr != nil {
			return n, sum, fmt.Errorf("reading the body: %w", rerr)
		}
	}
}

// Verify returns a reader of r, a blob's bytes, that checks they number
// size and hash to sum. When they do not, it fails with an error wrapping
// blob.ErrCorrupt instead of returning the read that would complete (or
// overrun) them, so that whoever forwards them never forwards all of them.
// Closing it closes r.
func Verify(r io.ReadCloser, ref string, size int64, sum [32]byte) io.ReadCloser {
	return &verifier{r: r, ref: ref, size: size, sum: sum, h: sha256.New()}
}

type verifier struct {
	r    io.ReadCloser
	ref  string
	size int64
	sum  [32]byte
	h    hash.Hash
	n    int64
	ok   bool  // all size bytes read and their hash checked
	err  error // sticky
}

func (v *verifier) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.r.Read(p)
	if n > 0 {
		v.h.Write(p[:n])
		v.n += int64(n)
	}
	switch {
	case v.n > v.size:
		return 0, v.fail(fmt.Sprintf("more than the %d bytes announced", v.size))
	case v.n == v.size && !v.ok && (n > 0 || err == io.EOF):
		var got [32]byte
		if v.h.Sum(got[:0]); got != v.sum {
			return 0, v.fail("SHA-256 differs")
		}
		v.ok = true
	case v.n < v.size && err == io.EOF:
		return 0, v.fail(fmt.Sprintf("%d bytes of the %d announced", v.n, v.size))
	}
	return n, err
}

func (v *verifier) fail(why string) error {
	v.err = fmt.Errorf("%w: %.200q: %s", blob.ErrCorrupt, v.ref, why)
	return v.err
}

func (v *verifier) Close() error { return v.r.Close() }

// WithContext returns a reader of r that fails with ctx's error once ctx is
// done (checked before each read). Closing it closes r.
func WithContext(ctx context.Context, r io.ReadCloser) io.ReadCloser {
	return &ctxReader{ctx: ctx, r: r}
}

type ctxReader struct {
	ctx context.Context
	r   io.ReadCloser
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

func (c *ctxReader) Close() error { return c.r.Close() }
