package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// The body of POST /retry-tasks is read by decodeTask, which streams it:
// with a blob store, a task's body may be 64 MiB, which is not to be held in
// memory, let alone decoded by encoding/json. decodeTask walks the top-level
// object itself. The value of a body or bodyBase64 member it unescapes (and
// decodes from base64) as it reads it, into a bodyBuffer, which holds it
// while it is small and streams it into the blob store once it is not. Every
// other member, small by rule (Config.MaxBodyBytes together), it copies as
// written into an object of its own, which goes through parseObject and the
// checks of parseTask (checkTask) as any body does: no unknown or repeated
// member, valid UTF-8, no escape of a lone surrogate, in the body's string
// too. The task it returns is the one parseTask returns for the same JSON
// (FuzzDecodeTask holds them to it).

// scanBufferSize is how much of the request decodeTask reads at a time,
// and how much of a body it unescapes before handing it on.
const scanBufferSize = 32 << 10

// scratch is a decoder's buffers, kept for the next: most requests are
// small, and making 64 KiB for each would cost more than reading them.
type scratch struct {
	buf []byte
	out *bufio.Writer
}

var scratches = sync.Pool{New: func() any {
	return &scratch{buf: make([]byte, scanBufferSize), out: bufio.NewWriterSize(nil, scanBufferSize)}
}}

// taskDecoder is the state of one decodeTask.
type taskDecoder struct {
	s    *server
	ctx  context.Context
	r    io.Reader
	buf  []byte
	i, n int   // buf[i:n] is read and not yet consumed
	err  error // what r returned last, once it returned an error (io.EOF at the end)

	rest     []byte                // the object without its streamed members
	seen     map[string]bool       // the object's keys
	streamed map[string]*bodyValue // the members read as bodies
	out      *bufio.Writer         // batches the small writes of escapes
}

// errSink marks an error of the body's writer: the blob store's.
type errSink struct{ err error }

func (e errSink) Error() string { return e.err.Error() }

// decodeTask reads a task from r as parseTask reads one from memory (rule
// checks a bodyRef), streaming its body into a bodyBuffer. The task's body,
// when it has one, is in its streamed bodyBuffer until settleBody; the
// caller must call settleBody or discard. Errors are the API's: a 400 for
// a bad request, a 413 when r is an http.MaxBytesReader past its limit
// (limit), a 503 when the blob store fails.
func (s *server) decodeTask(ctx context.Context, r io.Reader, limit int64, now time.Time, rule func(string) string) (*taskRequest, error) {
	sc := scratches.Get().(*scratch)
	d := &taskDecoder{s: s, ctx: ctx, r: r, buf: sc.buf, out: sc.out,
		rest: make([]byte, 0, 512), seen: map[string]bool{}, streamed: map[string]*bodyValue{}}
	req, err := d.decode(now, rule)
	sc.out.Reset(nil) // nothing of the request stays in the pool
	scratches.Put(sc)
	if err == nil {
		return req, nil
	}
	for _, v := range d.streamed {
		v.buf.abort()
	}
	if e, ok := errors.AsType[*APIError](err); ok {
		return nil, e
	}
	if e, ok := errors.AsType[errSink](err); ok {
		return nil, blobError(e.err)
	}
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return nil, tooLarge(limit)
	}
	return nil, invalid("", "reading the request body: %v", err)
}

func tooLarge(limit int64) *APIError {
	return errorf(http.StatusRequestEntityTooLarge, CodeTooLarge, "", "request body is over %d bytes", limit)
}

func malformed(format string, args ...any) *APIError {
	return invalid("", "malformed JSON: "+format, args...)
}

// fill makes at least k bytes (k ≤ len(d.buf)) readable at d.buf[d.i:],
// and reports whether it could.
func (d *taskDecoder) fill(k int) bool {
	for d.n-d.i < k {
		if d.err != nil {
			return false
		}
		if d.i > 0 {
			d.n = copy(d.buf, d.buf[d.i:d.n])
			d.i = 0
		}
		var n int
		n, d.err = d.r.Read(d.buf[d.n:])
		d.n += n
	}
	return true
}

// cutShort is the error of a body that ended where more was wanted.
func (d *taskDecoder) cutShort() error {
	if d.err != nil && d.err != io.EOF {
		return d.err
	}
	return invalid("", "request body is empty or cut short: want one JSON object")
}

// space skips whitespace and returns the next byte, unread; ok is false at
// the end of the body.
func (d *taskDecoder) space() (c byte, ok bool) {
	for d.fill(1) {
		switch c = d.buf[d.i]; c {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return c, true
		}
	}
	return 0, false
}

// checkRest holds the members kept to Config.MaxBodyBytes.
func (d *taskDecoder) checkRest() error {
	if int64(len(d.rest)) > d.s.maxBody {
		return errorf(http.StatusRequestEntityTooLarge, CodeTooLarge, "",
			"request body is over %d bytes apart from the task's body", d.s.maxBody)
	}
	return nil
}

func (d *taskDecoder) decode(now time.Time, rule func(string) string) (*taskRequest, error) {
	c, ok := d.space()
	if !ok {
		return nil, d.cutShort()
	}
	if c != '{' {
		return nil, invalid("", "request body must be a JSON object")
	}
	d.i++
	d.rest = append(d.rest, '{')
	for members := 0; ; members++ {
		c, ok := d.space()
		switch {
		case !ok:
			return nil, d.cutShort()
		case c == '}' && members == 0:
			d.i++
		case c != '"':
			return nil, malformed("invalid character %q looking for beginning of object key string", c)
		default:
			if err := d.member(); err != nil {
				return nil, err
			}
			c, ok = d.space()
			switch {
			case !ok:
				return nil, d.cutShort()
			case c == ',':
				d.i++
				continue
			case c == '}':
				d.i++
			default:
				return nil, malformed("invalid character %q after object key:value pair", c)
			}
		}
		break
	}
	if c, ok := d.space(); ok {
		return nil, invalid("", "unexpected data after the JSON object (%q)", c)
	} else if d.err != io.EOF {
		return nil, d.cutShort()
	}
	d.rest = append(d.rest, '}')
	m, err := parseObject(d.rest)
	if err != nil {
		return nil, err
	}
	return checkTask(&fields{m: m, streamed: d.streamed}, now, rule)
}

// member reads one "key": value of the object, the key's quote next.
func (d *taskDecoder) member() error {
	at := len(d.rest)
	if len(d.rest) > 1 {
		d.rest = append(d.rest, ',')
	}
	keyAt := len(d.rest)
	if err := d.copyString(); err != nil {
		return err
	}
	raw := d.rest[keyAt:]
	key := string(raw[1 : len(raw)-1]) // as written, when it holds no escape
	if bytes.IndexByte(raw, '\\') >= 0 {
		if err := json.Unmarshal(raw, &key); err != nil {
			return malformed("object key: %v", err)
		}
	}
	if d.seen[key] {
		return invalid(key, "field %q appears more than once", key)
	}
	d.seen[key] = true
	c, ok := d.space()
	switch {
	case !ok:
		return d.cutShort()
	case c != ':':
		return malformed("invalid character %q after object key", c)
	}
	d.i++
	d.rest = append(d.rest, ':')
	c, ok = d.space()
	if !ok {
		return d.cutShort()
	}
	if (key == "body" || key == "bodyBase64") && c == '"' {
		d.rest = d.rest[:at] // the member is not kept
		d.i++
		return d.streamBody(key)
	}
	return d.copyValue(c)
}

// copyString appends a JSON string as written, its quote next, to d.rest.
// It checks no more than where the string ends: parseObject checks the
// rest.
func (d *taskDecoder) copyString() error {
	d.rest = append(d.rest, '"')
	d.i++
	for {
		if !d.fill(1) {
			return d.cutShort()
		}
		seg := d.buf[d.i:d.n]
		j := bytes.IndexAny(seg, "\"\\")
		if j < 0 {
			d.rest = append(d.rest, seg...)
			d.i = d.n
		} else {
			d.rest = append(d.rest, seg[:j+1]...)
			d.i += j + 1
			if seg[j] == '"' {
				return d.checkRest()
			}
			if !d.fill(1) { // the escaped byte
				return d.cutShort()
			}
			d.rest = append(d.rest, d.buf[d.i])
			d.i++
		}
		if err := d.checkRest(); err != nil {
			return err
		}
	}
}

// copyValue appends a JSON value as written, starting with c (unread), to
// d.rest. It finds where the value ends; parseObject checks the value.
func (d *taskDecoder) copyValue(c byte) error {
	switch c {
	case '"':
		return d.copyString()
	case '{', '[':
		depth := 0
		for {
			if !d.fill(1) {
				return d.cutShort()
			}
			seg := d.buf[d.i:d.n]
			j := bytes.IndexAny(seg, "\"{}[]")
			if j < 0 {
				d.rest = append(d.rest, seg...)
				d.i = d.n
				if err := d.checkRest(); err != nil {
					return err
				}
				continue
			}
			d.rest = append(d.rest, seg[:j]...)
			d.i += j
			switch seg[j] {
			case '"':
				if err := d.copyString(); err != nil {
					return err
				}
				continue
			case '{', '[':
				depth++
			default:
				depth--
			}
			d.rest = append(d.rest, seg[j])
			d.i++
			if depth == 0 {
				return d.checkRest()
			}
		}
	}
	// A number, true, false or null: up to what may follow a value.
	for d.fill(1) {
		seg := d.buf[d.i:d.n]
		j := bytes.IndexAny(seg, ",}] \t\r\n")
		if j >= 0 {
			seg = seg[:j]
		}
		d.rest = append(d.rest, seg...)
		d.i += len(seg)
		if err := d.checkRest(); err != nil || j >= 0 {
			return err
		}
	}
	return nil
}

// streamBody reads the value of the member key (body or bodyBase64), a
// string whose opening quote was read, into a bodyBuffer: unescaped, and,
// for bodyBase64, decoded from base64. The first body member goes to a
// bodyBuffer of the server's; a second (body and bodyBase64 both given,
// which checkTask refuses) is only checked and counted.
func (d *taskDecoder) streamBody(key string) error {
	v := &bodyValue{buf: &bodyBuffer{discard: true}}
	if len(d.streamed) == 0 {
		v.buf = d.s.newBodyBuffer(d.ctx)
	}
	d.streamed[key] = v
	d.out.Reset(v.buf)
	var w io.Writer = d.out
	var b64 *base64Writer
	if key == "bodyBase64" {
		b64 = newBase64Writer(d.out)
		w = b64
	}
	if err := d.unescape(w, key); err != nil {
		return err
	}
	if b64 != nil {
		if err := b64.close(); err != nil {
			return errSink{err}
		}
		v.badBase64 = b64.bad
	}
	if err := d.out.Flush(); err != nil {
		return errSink{err}
	}
	return nil
}

// unescape writes the characters of a JSON string, its opening quote read,
// to w, up to its closing quote, which it reads. It refuses what
// parseObject refuses in a string: a control character, a bad escape,
// invalid UTF-8, and an escape of a lone surrogate (naming field).
func (d *taskDecoder) unescape(w io.Writer, field string) error {
	write := func(p []byte) error {
		if _, err := w.Write(p); err != nil {
			return errSink{err}
		}
		return nil
	}
	var enc [utf8.UTFMax]byte
	for {
		if !d.fill(1) {
			return d.cutShort()
		}
		// The longest run of characters that stand for themselves.
		seg := d.buf[d.i:d.n]
		j := 0
		for j < len(seg) {
			c := seg[j]
			if c < utf8.RuneSelf {
				if c < ' ' || c == '"' || c == '\\' {
					break
				}
				j++
				continue
			}
			if !utf8.FullRune(seg[j:]) {
				break
			}
			r, size := utf8.DecodeRune(seg[j:])
			if r == utf8.RuneError && size == 1 {
				return invalid("", "request body is not valid UTF-8")
			}
			j += size
		}
		if j > 0 {
			if err := write(seg[:j]); err != nil {
				return err
			}
			d.i += j
			continue
		}
		switch c := seg[0]; {
		case c == '"':
			d.i++
			return nil
		case c >= utf8.RuneSelf: // a character cut by the end of d.buf
			if !d.fill(utf8.UTFMax) && !utf8.FullRune(d.buf[d.i:d.n]) {
				return invalid("", "request body is not valid UTF-8")
			}
			continue
		case c < ' ':
			return malformed("invalid character %q in string literal", c)
		}
		// An escape.
		if !d.fill(2) {
			return d.cutShort()
		}
		e := d.buf[d.i+1]
		var b byte
		switch e {
		case '"', '\\', '/':
			b = e
		case 'b':
			b = '\b'
		case 'f':
			b = '\f'
		case 'n':
			b = '\n'
		case 'r':
			b = '\r'
		case 't':
			b = '\t'
		case 'u':
			r, err := d.unicodeEscape(field)
			if err != nil {
				return err
			}
			if err := write(enc[:utf8.EncodeRune(enc[:], r)]); err != nil {
				return err
			}
			continue
		default:
			return malformed("invalid character %q in string escape code", e)
		}
		d.i += 2
		if err := write([]byte{b}); err != nil {
			return err
		}
	}
}

// unicodeEscape reads a \uXXXX escape, and the low half after it when it is
// the high half of a surrogate pair, and returns the character.
func (d *taskDecoder) unicodeEscape(field string) (rune, error) {
	r, err := d.hex4()
	if err != nil {
		return 0, err
	}
	esc := string(d.buf[d.i : d.i+6])
	d.i += 6
	if !utf16.IsSurrogate(r) {
		return r, nil
	}
	if r < 0xdc00 && d.fill(2) && d.buf[d.i] == '\\' && d.buf[d.i+1] == 'u' {
		r2, err := d.hex4()
		if err != nil {
			return 0, err
		}
		if pair := utf16.DecodeRune(r, r2); pair != utf8.RuneError {
			d.i += 6
			return pair, nil
		}
	}
	return 0, invalid(field, "%s is an escape of a lone UTF-16 surrogate, which is no character: "+
		"send the character itself (UTF-8) or its surrogate pair", esc)
}

// hex4 reads the digits of the \u escape at d.i, leaving d.i there.
func (d *taskDecoder) hex4() (rune, error) {
	if !d.fill(6) {
		return 0, d.cutShort()
	}
	var r rune
	for _, c := range d.buf[d.i+2 : d.i+6] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, malformed("invalid character %q in \\u hexadecimal character escape", c)
		}
		r = r<<4 | rune(c)
	}
	return r, nil
}
