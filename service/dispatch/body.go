package dispatch

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
)

// A body by reference (Request.BodyRef) is opened in Config.Blobs at each
// attempt, before a connection is taken, and again if fasthttp sends the
// request a second time (errStale) after some of it was read. Its bytes
// are copied from the blob store's reader to the connection through one
// pooled buffer of chunkSize, after the head: a body of any size costs an
// attempt that buffer, not its size. One over concurrentBody is written
// while the answer is read, as an inline one is. The Content-Length is
// the size Open gives, which for a caller's object may differ from the
// size given when the task was made; exactly that many bytes are sent.
//
// When the reader fails before the last of them (a blob found corrupt, the
// blob store unreachable, the attempt's context done), the request is left
// half sent: the attempt ends at once (the target would wait for the rest,
// and not answer), its connection is closed, never reused, and its error
// is the body's (a bodyError), retried like a network error. A blob
// that cannot be opened (not found, no blob store) fails the attempt the
// same way, before any connection is used.

// ErrNoBlobStore is returned (wrapped) for a request that holds its body by
// reference to a Dispatcher without a blob store (Config.Blobs nil).
var ErrNoBlobStore = errors.New("no blob store to read it from")

// chunkSize is the size of the buffer a body by reference is copied
// through: past the 16 KiB of a TLS record, and few enough system calls.
const chunkSize = 32 << 10

// bodyError is the failure of a body by reference: it could not be opened,
// or its reader failed after sent of its bytes had gone out. It is not the
// connection's failure.
type bodyError struct {
	ref        string
	sent, size int64
	midway     bool // the reader failed, after sent bytes
	err        error
}

func (e *bodyError) Unwrap() error { return e.err }

// Error reads "body blob:sha256:…: blob not found", naming the reference
// once (the blob stores' errors may name it already).
func (e *bodyError) Error() string {
	var b strings.Builder
	msg := e.err.Error()
	b.WriteString("body")
	if !strings.Contains(msg, e.ref) {
		b.WriteString(" ")
		b.WriteString(e.ref)
	}
	if e.midway {
		fmt.Fprintf(&b, " (%d of %d bytes sent)", e.sent, e.size)
	}
	b.WriteString(": ")
	b.WriteString(msg)
	return b.String()
}

// errBodyShort ends a body whose reader stopped (io.EOF) before the size
// its Open gave.
var errBodyShort = errors.New("the blob ended before its announced size")

// openBody opens c's body by reference for a try, closing the reader of an
// earlier try, and sets the Content-Length to its size (once the head is
// built: build sets it the first time).
func (c *call) openBody() error {
	c.closeBody()
	blobs := c.d.cfg.Blobs
	if blobs == nil {
		return &bodyError{ref: c.ref, err: ErrNoBlobStore}
	}
	r, size, err := blobs.Open(c.bodyCtx, c.ref)
	if err == nil && size < 0 {
		r.Close()
		err = fmt.Errorf("the blob store gave a size of %d", size)
	}
	if err != nil {
		return &bodyError{ref: c.ref, err: err}
	}
	c.blob, c.size, c.blobRead = r, size, false
	return nil
}

// closeBody closes the reader of c's body by reference, if one is open.
func (c *call) closeBody() {
	if c.blob != nil {
		_ = c.blob.Close()
		c.blob = nil
	}
}

// writeBody copies c's body by reference to bw, exactly c.size bytes of
// it, and flushes bw. A failure of the reader is a *bodyError; one of bw
// is returned as it is.
func (c *call) writeBody(bw *bufio.Writer) error {
	c.blobRead = true
	bp := c.d.chunks.Get().(*[]byte)
	defer c.d.chunks.Put(bp)
	buf := *bp
	var sent int64
	for empty := 0; sent < c.size; {
		n, err := c.blob.Read(buf[:min(int64(len(buf)), c.size-sent)])
		if n > 0 {
			if _, werr := bw.Write(buf[:n]); werr != nil {
				return werr
			}
			sent += int64(n)
			empty = 0
		} else if err == nil {
			if empty++; empty == 100 { // as bufio gives up on such a reader
				err = io.ErrNoProgress
			}
		}
		switch {
		case err == nil, err == io.EOF && sent == c.size:
		case err == io.EOF:
			return &bodyError{ref: c.ref, sent: sent, size: c.size, midway: true, err: errBodyShort}
		default:
			return &bodyError{ref: c.ref, sent: sent, size: c.size, midway: true, err: err}
		}
	}
	return bw.Flush()
}

// isBodyError reports whether err is a body's failure, not the
// connection's.
func isBodyError(err error) bool {
	if err == nil {
		return false // before be, which escapes: an attempt that went well allocates nothing here
	}
	var be *bodyError
	return errors.As(err, &be)
}
