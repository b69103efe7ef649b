package api

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/retrykit/retry/service/blob"
)

// hashInlineMax is the largest body a request's hash takes whole (see
// taskRequest.hash): DefaultMaxBodyBytes, the limit of every body before
// bodies could go to a blob store, so that the tasks created before then
// keep their hashes and their repeats stay repeats. A larger body enters the
// hash as its SHA-256, which the blob store computes while it keeps it.
const hashInlineMax = DefaultMaxBodyBytes

// errAborted is what a Put in progress reads when its request is refused:
// the Put fails, and nothing of the body becomes visible in the store.
var errAborted = errors.New("api: the request was refused before its body was stored")

// errPutReturned is what a write reads after the Put returned.
var errPutReturned = errors.New("api: the blob store stopped reading the body")

// A bodyBuffer takes a task's body as it is read and decides where it goes:
// it holds the bytes while they are at most its threshold, and once they
// grow past it, starts a Put of them into the blob store and streams the
// rest there through an io.Pipe as it comes, holding only the first
// hashInlineMax bytes (for the request's hash) and none past them. The Put
// completes only when finish is called, once the whole request has been
// checked: a refused request aborts it (abort), and a Put that fails leaves
// nothing behind, so a refused request stores nothing.
//
// Both ways a body comes in go through one: the stream decoder writes the
// body of POST /retry-tasks into one as it unescapes it, and a batch writes
// each of its (in-memory) bodies into one.
type bodyBuffer struct {
	ctx       context.Context
	blobs     blob.Store // nil: held whatever its size
	threshold int64
	discard   bool // count the bytes only: the request is refused anyway

	n   int64
	buf []byte // all the bytes until they go to the store; then the first hashInlineMax, nil past them

	pw   *io.PipeWriter // the Put in progress, once the bytes passed threshold
	done chan putResult
	err  error // the Put's failure, once a write saw it
}

type putResult struct {
	b   blob.Blob
	err error
}

// placed is where finish put a body: in memory (data, non-nil even when
// empty) or in the blob store (b, with head, its bytes when they are at most
// hashInlineMax).
type placed struct {
	data []byte
	b    *blob.Blob
	head []byte
}

func (s *server) newBodyBuffer(ctx context.Context) *bodyBuffer {
	return &bodyBuffer{ctx: ctx, blobs: s.blobs, threshold: s.threshold, buf: []byte{}}
}

// Write takes the next bytes of the body. An error is the blob store's.
func (b *bodyBuffer) Write(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	b.n += int64(len(p))
	switch {
	case b.discard:
		return len(p), nil
	case b.pw == nil && (b.blobs == nil || b.n <= b.threshold):
		b.buf = append(b.buf, p...)
		return len(p), nil
	case b.pw == nil:
		pr, pw := io.Pipe()
		b.pw, b.done = pw, make(chan putResult, 1)
		go func() {
			bl, err := b.blobs.Put(b.ctx, pr)
			pr.CloseWithError(cmp.Or(err, errPutReturned))
			b.done <- putResult{bl, err}
		}()
		if _, err := pw.Write(b.buf); err != nil {
			b.err = err
			return 0, err
		}
	}
	if _, err := b.pw.Write(p); err != nil {
		b.err = err
		return 0, err
	}
	if b.buf != nil && b.n <= hashInlineMax {
		b.buf = append(b.buf, p...)
	} else {
		b.buf = nil
	}
	return len(p), nil
}

// finish completes the body: the bytes held, or the blob once the store
// has it durably.
func (b *bodyBuffer) finish() (placed, error) {
	if b.pw == nil {
		return placed{data: b.buf}, nil
	}
	if b.err != nil {
		b.abort()
		return placed{}, b.err
	}
	b.pw.Close()
	r := <-b.done
	b.pw = nil
	switch {
	case r.err != nil:
		return placed{}, r.err
	case r.b.Size != b.n:
		return placed{}, fmt.Errorf("api: the blob store kept %d bytes of a body of %d", r.b.Size, b.n)
	}
	return placed{b: &r.b, head: b.buf}, nil
}

// abort fails a Put in progress, and waits for it to return; nothing of
// the body is stored. It does nothing once finish was called.
func (b *bodyBuffer) abort() {
	if b.pw == nil {
		return
	}
	b.pw.CloseWithError(errAborted)
	<-b.done
	b.pw = nil
}

// settleBody puts q's body where it belongs, once q is known to be good:
// in the task's row when it is at most the threshold (or there is no blob
// store), in the blob store otherwise, q keeping its reference. A body the
// stream decoder read is already on its way there (its Put completes now);
// a body held in memory (a batch's) is put now.
func (s *server) settleBody(ctx context.Context, q *taskRequest) error {
	b := q.streamed
	if b == nil {
		if q.body == nil || s.blobs == nil || int64(len(q.body)) <= s.threshold {
			return nil
		}
		b = s.newBodyBuffer(ctx)
		if _, err := b.Write(q.body); err != nil {
			b.abort()
			return blobError(err)
		}
	}
	q.streamed = nil
	p, err := b.finish()
	if err != nil {
		return blobError(err)
	}
	if p.b == nil {
		q.body = p.data
		return nil
	}
	q.body, q.moved, q.bodyRef, q.hashHead = nil, p.b, p.b.Ref, p.head
	return nil
}

// blobError is the 503 of a blob store that failed to keep a body.
func blobError(err error) error {
	return &APIError{Status: http.StatusServiceUnavailable, Code: CodeUnavailable,
		Message: "service unavailable, try again", cause: fmt.Errorf("blob store: %w", err)}
}

// base64Chunk is how many base64 characters a base64Writer decodes at a
// time: a multiple of 4.
const base64Chunk = 4 << 10

// A base64Writer decodes standard base64 written to it in pieces, as
// base64.StdEncoding.Strict().DecodeString decodes the whole (padding
// required, padding bits zero, CR and LF skipped, nothing after the
// padding), writing the bytes to w. It keeps taking input after the input
// turned out bad (bad), so that its JSON string is still read to its end.
type base64Writer struct {
	w     io.Writer
	in    []byte // characters not decoded yet
	out   []byte
	ended bool // a padded quantum was decoded: nothing may follow
	bad   bool
}

func newBase64Writer(w io.Writer) *base64Writer {
	return &base64Writer{w: w, in: make([]byte, 0, base64Chunk), out: make([]byte, base64.StdEncoding.DecodedLen(base64Chunk))}
}

func (d *base64Writer) Write(p []byte) (int, error) {
	for _, c := range p {
		switch {
		case c == '\r' || c == '\n' || d.bad:
			continue
		case d.ended:
			d.bad = true
			continue
		}
		d.in = append(d.in, c)
		if len(d.in) == base64Chunk {
			if err := d.flush(); err != nil {
				return 0, err
			}
		}
	}
	return len(p), nil
}

func (d *base64Writer) flush() error {
	n, err := base64.StdEncoding.Strict().Decode(d.out, d.in)
	if err != nil {
		d.bad = true
		return nil
	}
	d.ended = d.in[len(d.in)-1] == '='
	d.in = d.in[:0]
	_, err = d.w.Write(d.out[:n])
	return err
}

// close decodes what is left; bad says whether the whole was base64.
func (d *base64Writer) close() error {
	if len(d.in) == 0 || d.bad {
		return nil
	}
	return d.flush()
}
