package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path"
	"strconv"
	"strings"
)

// What net/http answers on its own is plain text or HTML. Two places of it
// are outside any handler of the API's: a ServeMux the API's handler is
// mounted in redirects a path it would clean (307, with an HTML body), and
// the server answers a request it cannot read (431 for headers over
// http.Server.MaxHeaderBytes, 400 for a malformed one) on the connection
// itself. CanonicalPaths and Listener make those answers JSON too.

// canonicalPath reports whether p, a request's escaped path, is as
// net/http.ServeMux would leave it: rooted, no empty, "." or ".." segment
// (a trailing slash allowed). ServeMux redirects any other path.
func canonicalPath(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c == p
}

// uncleanPath is the 404 of a path that is not canonical. The API's paths
// are fixed, so such a path is a client's mistake, better shown than
// redirected to where it might have meant to go.
func uncleanPath(r *http.Request) *APIError {
	return errorf(http.StatusNotFound, CodeNotFound, "",
		"no route for %s %s (paths are not cleaned: no empty, '.' or '..' segments)", r.Method, r.URL.EscapedPath())
}

// CanonicalPaths returns h behind a check that answers a request whose
// path is not canonical (a doubled slash, a "." or ".." segment) with the
// API's JSON 404, where a net/http.ServeMux would redirect it with an HTML
// body. New's handler checks this itself; a server that mounts it in a
// ServeMux of its own, as retryd does beside /metrics, wraps that mux.
func CanonicalPaths(h http.Handler) http.Handler {
	s := &server{log: slog.New(slog.DiscardHandler)}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !canonicalPath(r.URL.EscapedPath()) {
			s.writeError(w, r, uncleanPath(r))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Listener returns ln with the answers net/http's server writes on a
// connection itself, before any handler runs, rewritten in the API's JSON
// error shape: 431 (code headers_too_large) for a request line and headers
// over http.Server.MaxHeaderBytes, and 400 (or the 501 or 505 net/http
// chooses; code invalid_request) for a request it cannot read. Everything
// else passes through untouched.
//
// A server sets no handler for those answers: net/http writes them in one
// Write, in a fixed form (status line, then exactly "Content-Type:
// text/plain; charset=utf-8" and "Connection: close", then a one-line
// text), which is what is recognised. An answer a handler writes carries
// more headers (Date, and a length or chunking) unless it sets out not to,
// and the API's handlers answer JSON: they do not match.
// A later Go that wrote those answers otherwise would leave them plain
// text, not break them; TestOversizedHeaderIsJSON431 would say so.
//
// Listener is for plain TCP (HTTP/1.x), as retryd serves; behind TLS the
// bytes it sees are encrypted, and it changes nothing.
func Listener(ln net.Listener) net.Listener { return &listener{ln} }

type listener struct{ net.Listener }

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &conn{c}, nil
}

type conn struct{ net.Conn }

func (c *conn) Write(b []byte) (int, error) {
	if out := jsonServerError(b); out != nil {
		if _, err := c.Conn.Write(out); err != nil {
			return 0, err
		}
		return len(b), nil
	}
	return c.Conn.Write(b)
}

// CloseWrite lets net/http half-close the connection after such an answer,
// as it does a *net.TCPConn's, so that the client reads it before the
// connection is reset.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// ReadFrom keeps the *net.TCPConn's sendfile path for response bodies.
func (c *conn) ReadFrom(r io.Reader) (int64, error) { return io.Copy(c.Conn, r) }

// plainErrorHeaders is what net/http's server writes between the status
// line and the text of an answer to a request it could not read.
const plainErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// jsonServerError returns b, when it is such an answer, in JSON; else nil.
func jsonServerError(b []byte) []byte {
	rest, ok := bytes.CutPrefix(b, []byte("HTTP/1.1 "))
	if !ok {
		return nil
	}
	line, text, ok := bytes.Cut(rest, []byte(plainErrorHeaders))
	if !ok || len(line) < 4 || line[3] != ' ' || bytes.ContainsAny(line, "\r\n") || bytes.ContainsAny(text, "\r\n") {
		return nil
	}
	status, err := strconv.Atoi(string(line[:3]))
	if err != nil || status < 400 || status > 599 {
		return nil
	}
	e := &APIError{Status: status, Code: CodeInvalidRequest, Message: string(line[4:])}
	if !bytes.HasPrefix(text, line[:3]) { // the text is not the status line again
		e.Message += ": " + string(text)
	}
	if status == http.StatusRequestHeaderFieldsTooLarge {
		e.Code, e.Message = CodeHeadersTooLarge, "the request line and headers are over the server's limit"
	}
	body, err := json.Marshal(struct {
		Error *APIError `json:"error"`
	}{e})
	if err != nil {
		return nil
	}
	body = append(body, '\n')
	return fmt.Appendf(nil, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nX-Content-Type-Options: nosniff\r\n"+
		"Connection: close\r\nContent-Length: %d\r\n\r\n%s", status, http.StatusText(status), len(body), body)
}
