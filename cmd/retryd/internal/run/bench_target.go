package run

import (
	"bufio"
	"bytes"
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

// target is the loopback HTTP server the benchmark calls. It answers 503
// until a task's (Idempotency-Key's) fail-th attempt, then 200.
type target struct {
	addr string
	ln   net.Listener
	srv  *http.Server // for targetNetHTTP
	seen sync.Map     // Idempotency-Key → *atomic.Int32
	fail atomic.Int32
}

func startTarget(kind string, fail int) (*target, error) {
	if kind != targetLean && kind != targetNetHTTP {
		return nil, usageError{fmt.Errorf("--target %q: want %s or %s", kind, targetLean, targetNetHTTP)}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	tg := &target{addr: ln.Addr().String(), ln: ln}
	tg.fail.Store(int32(fail))
	if kind == targetNetHTTP {
		tg.srv = &http.Server{Handler: tg, ReadHeaderTimeout: 5 * time.Second}
		go tg.srv.Serve(ln)
	} else {
		go tg.serveLean()
	}
	return tg, nil
}

// answer counts an attempt of the task with idempotency key key and
// returns the status to answer it with.
func (tg *target) answer(key string) int {
	v, ok := tg.seen.Load(key)
	if !ok {
		v, _ = tg.seen.LoadOrStore(key, new(atomic.Int32))
	}
	if n := v.(*atomic.Int32).Add(1); n < tg.fail.Load() {
		return http.StatusServiceUnavailable
	}
	return http.StatusOK
}

func (tg *target) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.WriteHeader(tg.answer(r.Header.Get("Idempotency-Key")))
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

var (
	lean503 = []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
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
		if _, err := br.Discard(length); err != nil {
			return
		}
		resp := lean200
		if tg.answer(key) != http.StatusOK {
			resp = lean503
		}
		if _, err := c.Write(resp); err != nil {
			return
		}
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
