package run

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The bench's targets. A target on another machine costs retryd nothing;
// in process it takes its share of the same cores, so by default the bench
// calls the cheapest correct HTTP/1.1 responder it can, and --target
// net/http measures against Go's server instead.
const (
	targetLean    = "lean"
	targetNetHTTP = "net/http"
)

// target is the loopback HTTP server the benchmark calls. It answers 500
// until a task's (Idempotency-Key's) fail-th attempt, then 200, and keeps
// per key what it saw, for the correctness checks and the second-attempt
// lag.
type target struct {
	addr string
	ln   net.Listener
	srv  *http.Server // for targetNetHTTP
	base time.Time    // the zero of the times in keyState, read on the monotonic clock
	seen sync.Map     // Idempotency-Key → *keyState
	fail atomic.Int32
	// delivered counts the keys answered 200 at least once; requests,
	// every request.
	delivered atomic.Int64
	requests  atomic.Int64
	// bodyBytes counts the request body bytes read, to check that large
	// bodies arrive whole.
	bodyBytes atomic.Int64
}

// keyState is what the target saw of one idempotency key. Times are
// nanoseconds since target.base; 0 means not yet.
type keyState struct {
	n     atomic.Int32 // requests
	ok    atomic.Int32 // 200s written
	recv1 atomic.Int64 // request 1's head read
	sent1 atomic.Int64 // response 1 about to be written
	recv2 atomic.Int64 // request 2's head read
}

func startTarget(kind string, fail int) (*target, error) {
	if kind != targetLean && kind != targetNetHTTP {
		return nil, usageError{fmt.Errorf("--target %q: want %s or %s", kind, targetLean, targetNetHTTP)}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("target: %w", err)
	}
	tg := &target{addr: ln.Addr().String(), ln: ln, base: time.Now()}
	tg.fail.Store(int32(fail))
	if kind == targetNetHTTP {
		tg.srv = &http.Server{Handler: tg, ReadHeaderTimeout: 5 * time.Second}
		go tg.srv.Serve(ln)
	} else {
		go tg.serveLean()
	}
	return tg, nil
}

// now is the time since tg.base, never 0, so that 0 can mean "not yet".
func (tg *target) now() int64 { return max(int64(time.Since(tg.base)), 1) }

// arrive counts a request of the task with idempotency key key, read at
// at, and returns the key's state, the request's number and the status to
// answer it with.
func (tg *target) arrive(key string, at int64) (*keyState, int32, int) {
	tg.requests.Add(1)
	v, ok := tg.seen.Load(key)
	if !ok {
		v, _ = tg.seen.LoadOrStore(key, new(keyState))
	}
	st := v.(*keyState)
	n := st.n.Add(1)
	switch n {
	case 1:
		st.recv1.Store(at)
	case 2:
		st.recv2.Store(at)
	}
	if n < tg.fail.Load() {
		return st, n, http.StatusInternalServerError
	}
	return st, n, http.StatusOK
}

// sending records when the response to request n of st is sent. The time
// is read before the write, since retryd may have the response (and start
// its retry delay) before a write call returns to a descheduled target: a
// second attempt cannot then look early for a late reading.
func (tg *target) sending(st *keyState, n int32) {
	if n == 1 {
		st.sent1.Store(tg.now())
	}
}

// answered records that the response to request n of st, with status,
// was written.
func (tg *target) answered(st *keyState, status int) {
	if status == http.StatusOK && st.ok.Add(1) == 1 {
		tg.delivered.Add(1)
	}
}

// state returns what the target saw of key, or nil.
func (tg *target) state(key string) *keyState {
	if v, ok := tg.seen.Load(key); ok {
		return v.(*keyState)
	}
	return nil
}

// waitDelivered waits until n keys have been answered 200, or ctx ends.
func (tg *target) waitDelivered(ctx context.Context, n int64) error {
	for tg.delivered.Load() < n {
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

func (tg *target) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := tg.now()
	nb, _ := io.Copy(io.Discard, r.Body)
	tg.bodyBytes.Add(nb)
	st, n, status := tg.arrive(r.Header.Get("Idempotency-Key"), at)
	tg.sending(st, n)
	w.WriteHeader(status)
	// The response is on its way only once flushed.
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	tg.answered(st, status)
}

func (tg *target) Close() {
	if tg.srv != nil {
		tg.srv.Close()
		return
	}
	tg.ln.Close()
}

// serveLean answers keep-alive HTTP/1.1 requests with a Content-Length
// body (or none), which is what retryd sends, and hangs up on anything
// else.
func (tg *target) serveLean() {
	for {
		c, err := tg.ln.Accept()
		if err != nil {
			return
		}
		go tg.leanConn(c)
	}
}

// The target fails with 500, not 503: a 503 is an overload signal, which
// retryd's host limiter slows down for, and the bench measures retryd with
// a target that fails but copes.
var (
	lean500 = []byte("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n")
	lean200 = []byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
)

func (tg *target) leanConn(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		length, key, err := leanRequest(br)
		if err != nil {
			return
		}
		at := tg.now()
		if _, err := br.Discard(length); err != nil {
			return
		}
		tg.bodyBytes.Add(int64(length))
		st, n, status := tg.arrive(key, at)
		resp := lean200
		if status != http.StatusOK {
			resp = lean500
		}
		tg.sending(st, n)
		if _, err := c.Write(resp); err != nil {
			return
		}
		tg.answered(st, status)
	}
}

// leanRequest reads a request head and returns its body's length and its
// Idempotency-Key.
func leanRequest(br *bufio.Reader) (length int, key string, err error) {
	if _, err := br.ReadSlice('\n'); err != nil { // the request line
		return 0, "", err
	}
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return 0, "", err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			return length, key, nil
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return 0, "", fmt.Errorf("bad header line %q", line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil || length < 0 {
				return 0, "", fmt.Errorf("bad Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			return 0, "", fmt.Errorf("Transfer-Encoding %q: not supported", value)
		case bytes.EqualFold(name, []byte("Idempotency-Key")):
			key = string(value)
		}
	}
}
