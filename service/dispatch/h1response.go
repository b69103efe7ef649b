package dispatch

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http/httputil"
	"strconv"

	"golang.org/x/net/http/httpguts"
)

// maxHeadBytes bounds a response's status line and header section, and
// maxInterim the informational (1xx) responses skipped before the final
// one: a target cannot make an attempt read without end.
const (
	maxHeadBytes = 1 << 20
	maxInterim   = 5
)

// errMalformed marks a response that does not parse as HTTP/1.x. It is a
// network-level failure of the attempt, retried like a dropped connection.
var errMalformed = errors.New("malformed HTTP response")

// head is what readHead keeps of a final response: the status, the
// headers an attempt reads, and how its body is framed.
type head struct {
	status     int
	retryAfter string
	location   string
	// keepAlive reports whether the connection may carry another request
	// once the body has been read to its end.
	keepAlive bool
	body      *body
}

// readHead reads a response to a request with the given method from br,
// skipping informational responses, and frames its body (RFC 9112 §6.3).
// It parses as net/http's client does wherever the two could disagree on
// what a response says.
func readHead(br *bufio.Reader, method string) (*head, error) {
	budget := maxHeadBytes
	for range maxInterim + 1 {
		h, err := readOne(br, method, &budget)
		if err != nil {
			return nil, err
		}
		if !interim(h.status) {
			return h, nil
		}
	}
	return nil, fmt.Errorf("%w: more than %d informational responses", errMalformed, maxInterim)
}

// interim reports whether status is an informational response that a
// final one follows: 1xx but 101 Switching Protocols, which a request that
// asked for no upgrade takes as its (unusable) answer.
func interim(status int) bool { return status >= 100 && status <= 199 && status != 101 }

// readOne reads one response head; budget is what remains of maxHeadBytes.
func readOne(br *bufio.Reader, method string, budget *int) (*head, error) {
	line, err := readLine(br, budget)
	if err != nil {
		return nil, err
	}
	proto, rest, _ := bytes.Cut(line, []byte(" "))
	if len(proto) != 8 || string(proto[:7]) != "HTTP/1." || !digits(proto[7:]) {
		return nil, fmt.Errorf("%w: status line %q", errMalformed, clip(line))
	}
	minor := int(proto[7] - '0')
	code, _, _ := bytes.Cut(rest, []byte(" "))
	if len(code) != 3 || !digits(code) || code[0] == '0' { // below 100 is no status (Result.Status 0 means none)
		return nil, fmt.Errorf("%w: status line %q", errMalformed, clip(line))
	}
	h := &head{status: int(code[0]-'0')*100 + int(code[1]-'0')*10 + int(code[2]-'0')}
	var (
		length                      = int64(-1)
		lengthText                  []byte // the first Content-Length, as written
		chunked, closing, keepAlive bool
		name                        []byte  // of the last field line
		cont                        *string // where a folded line continues, if anywhere
		seenRetryAfter, seenLoc     bool    // the first of each counts, as in net/http
	)
	for {
		line, err := readLine(br, budget)
		if err != nil {
			return nil, err
		}
		if len(line) == 0 {
			break
		}
		var value []byte
		if line[0] == ' ' || line[0] == '\t' {
			// An obsolete line folding continues the last field: a value
			// of its own for a list (Connection), more of the value for
			// the others (RFC 9112 §5.2), which only the framing fields
			// cannot take.
			if name == nil || fold(name, "Content-Length") || fold(name, "Transfer-Encoding") {
				return nil, fmt.Errorf("%w: folded line %q", errMalformed, clip(line))
			}
			if value = bytes.Trim(line, " \t"); !fieldValue(value) {
				return nil, fmt.Errorf("%w: folded line %q", errMalformed, clip(line))
			}
			if cont != nil {
				if *cont != "" && len(value) > 0 {
					*cont += " "
				}
				*cont += string(value)
				continue
			}
		} else {
			var ok bool
			name, value, ok = bytes.Cut(line, []byte(":"))
			if !ok || len(name) == 0 || !token(name) {
				return nil, fmt.Errorf("%w: header line %q", errMalformed, clip(line))
			}
			name = bytes.Clone(name) // line is only good until the next read
			if value = bytes.Trim(value, " \t"); !fieldValue(value) {
				return nil, fmt.Errorf("%w: the value of %s", errMalformed, clip(name))
			}
			cont = nil
		}
		switch {
		case fold(name, "Content-Length"):
			n, err := strconv.ParseInt(string(value), 10, 64)
			if err != nil || n < 0 || !digits(value) || (lengthText != nil && !bytes.Equal(value, lengthText)) {
				return nil, fmt.Errorf("%w: Content-Length %q", errMalformed, clip(value))
			}
			length, lengthText = n, bytes.Clone(value)
		case fold(name, "Transfer-Encoding") && minor > 0: // HTTP/1.0 has none
			// Only chunked is defined for responses a client did not
			// ask to compress; anything else cannot be framed.
			if !fold(value, "chunked") || chunked {
				return nil, fmt.Errorf("%w: Transfer-Encoding %q", errMalformed, clip(value))
			}
			chunked = true
		case fold(name, "Connection"):
			for _, opt := range bytes.Split(value, []byte(",")) {
				opt = bytes.Trim(opt, " \t")
				closing = closing || fold(opt, "close")
				keepAlive = keepAlive || fold(opt, "keep-alive")
			}
		case fold(name, "Retry-After") && !seenRetryAfter:
			h.retryAfter, seenRetryAfter, cont = string(value), true, &h.retryAfter
		case fold(name, "Location") && !seenLoc:
			h.location, seenLoc, cont = string(value), true, &h.location
		}
	}
	h.keepAlive = !closing && (minor > 0 || keepAlive) && h.status != 101
	if chunked && length >= 0 {
		// Both framings at once: the chunks are read, but such a message
		// may be smuggling another, so the connection is not trusted with
		// the next (RFC 9112 §6.1).
		h.keepAlive = false
	}
	switch {
	case h.status >= 100 && h.status <= 199 || h.status == 204 || h.status == 304 || method == "HEAD":
		h.body = &body{done: true, length: -1}
	case chunked:
		h.body = &body{r: httputil.NewChunkedReader(br), br: br, chunked: true, length: -1}
	case length >= 0:
		h.body = &body{r: br, length: length, done: length == 0}
	default:
		// Neither length nor chunks: the body runs to the end of the
		// connection, which then cannot be reused.
		h.body = &body{r: br, length: -1}
		h.keepAlive = false
	}
	return h, nil
}

// body reads a framed response body and knows whether it was read to its
// end, which a connection must be before it carries another request.
type body struct {
	r       io.Reader
	br      *bufio.Reader // of a chunked body, for its trailer section
	chunked bool
	length  int64 // of a Content-Length body, the bytes left; -1 otherwise
	done    bool  // read to its end
	err     error
}

func (b *body) Read(p []byte) (int, error) {
	switch {
	case b.done:
		return 0, io.EOF
	case b.err != nil:
		return 0, b.err
	case b.length >= 0 && int64(len(p)) > b.length:
		p = p[:b.length]
	}
	n, err := b.r.Read(p)
	switch {
	case b.length >= 0:
		if b.length -= int64(n); b.length == 0 {
			b.done = true
			return n, nil
		}
		if err == io.EOF {
			err = io.ErrUnexpectedEOF // the connection ended before the promised length
		}
	case err == io.EOF && b.chunked:
		budget := maxHeadBytes
		if terr := skipTrailers(b.br, &budget); terr != nil {
			err = terr
		} else {
			b.done = true
		}
	case err == io.EOF:
		b.done = true
	}
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}

// skipTrailers reads a chunked body's trailer section up to its empty line.
func skipTrailers(br *bufio.Reader, budget *int) error {
	for {
		line, err := readLine(br, budget)
		if err == io.EOF {
			return io.ErrUnexpectedEOF // the section must end with an empty line
		}
		if err != nil {
			return err
		}
		if len(line) == 0 {
			return nil
		}
	}
}

// readLine returns the next line without its line ending (CRLF, or a bare
// LF), charging its length to budget. The slice is valid until the next
// read from br.
func readLine(br *bufio.Reader, budget *int) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		// A line longer than the buffer: gather it, within the budget.
		long := append([]byte(nil), line...)
		for err == bufio.ErrBufferFull && len(long) <= *budget {
			line, err = br.ReadSlice('\n')
			long = append(long, line...)
		}
		line = long
	}
	*budget -= len(line)
	if *budget < 0 {
		return nil, fmt.Errorf("%w: response head over %d bytes", errMalformed, maxHeadBytes)
	}
	if err != nil {
		if err == io.EOF && len(line) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// fold reports whether b equals s, ignoring ASCII case.
func fold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// fieldValue reports whether b may be a field value: no control
// characters but horizontal tab (RFC 9110 §5.5), as net/http checks.
func fieldValue(b []byte) bool {
	for _, c := range b {
		if c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// token reports whether b is an RFC 9110 token, as a field name must be.
func token(b []byte) bool {
	for _, c := range b {
		if !httpguts.IsTokenRune(rune(c)) {
			return false
		}
	}
	return len(b) > 0
}

func digits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) > 0
}

// clip shortens what an error quotes of a response.
func clip(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}
