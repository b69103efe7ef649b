// Package statuswriter is the http.ResponseWriter wrapper that remembers the
// status a handler wrote, shared by the API (its request log, and so that a
// panic after the header went out writes no second one) and the tracing
// middleware (the server span's status code).
package statuswriter

import "net/http"

// Writer remembers the first status written through it: the one passed to
// WriteHeader, or 200 when Write came first. Status is 0 until then.
type Writer struct {
	http.ResponseWriter
	Status int
}

// WriteHeader records code unless a status was written already.
func (w *Writer) WriteHeader(code int) {
	if w.Status == 0 {
		w.Status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *Writer) Write(b []byte) (int, error) {
	if w.Status == 0 {
		w.Status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer (to
// flush a stream, set deadlines).
func (w *Writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }
