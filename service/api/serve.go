package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/retrykit/retry/service/internal/statuswriter"
)

// ServeHTTP routes r. The mux's own 404 and 405 answers are plain text, so
// they are found first (an empty pattern) and answered in the JSON shape,
// keeping the Allow header the mux sets. A path the mux would clean and
// redirect (with an HTML body) is no route: a JSON 404.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := s.now()
	sw := &statuswriter.Writer{ResponseWriter: w}
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("api: handler panicked", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(p))
			if sw.Status == 0 {
				s.writeError(sw, r, &APIError{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error"})
			}
		}
		s.log.Debug("api: request", "method", r.Method, "path", r.URL.Path, "status", sw.Status, "duration", s.now().Sub(start))
	}()
	if !canonicalPath(r.URL.EscapedPath()) {
		s.writeError(sw, r, uncleanPath(r))
		return
	}
	if _, pattern := s.mux.Handler(r); pattern == "" {
		s.writeError(sw, r, s.unrouted(r))
		return
	}
	s.mux.ServeHTTP(sw, r)
}

// unrouted tells a 405 (the path exists for other methods) from a 404.
func (s *server) unrouted(r *http.Request) *APIError {
	h, _ := s.mux.Handler(r)
	probe := &headerRecorder{header: http.Header{}}
	h.ServeHTTP(probe, r)
	if probe.status == http.StatusMethodNotAllowed {
		e := errorf(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "", "%s is not allowed here; allowed: %s", r.Method, probe.header.Get("Allow"))
		e.allow = probe.header.Get("Allow")
		return e
	}
	return errorf(http.StatusNotFound, CodeNotFound, "", "no route for %s %s", r.Method, r.URL.Path)
}

// endpoint authenticates the request and runs h, rendering its error.
func (s *server) endpoint(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenant, err := s.authenticate(r)
		if err == nil {
			err = h(w, r, tenant)
		}
		if err != nil {
			s.writeError(w, r, err)
		}
	})
}

func (s *server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var e *APIError
	if !errors.As(err, &e) {
		e = &APIError{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error", cause: err}
	}
	if e.Status >= 500 {
		s.log.Error("api: request failed", "method", r.Method, "path", r.URL.Path, "status", e.Status, "err", e.cause)
	}
	switch e.Status {
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="retryd"`)
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", e.allow)
	}
	WriteError(w, e)
}

// WriteError answers e in the API's error shape, {"error": {"code",
// "message", …}}, with its status: for handlers beside the API's own (the
// console's), so that a client reads one shape.
func WriteError(w http.ResponseWriter, e *APIError) {
	b, _ := json.Marshal(struct { // an APIError always encodes
		Error *APIError `json:"error"`
	}{e})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(e.Status)
	_, _ = w.Write(append(b, '\n'))
}

// writeJSON answers v with status. v is always one of this package's own
// types, so a failure to encode is a bug, logged.
func (s *server) writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		s.log.Error("api: encoding a response", "err", err)
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":"internal","message":"internal error"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// headerRecorder catches what the mux's built-in error handlers write.
type headerRecorder struct {
	header http.Header
	status int
}

func (h *headerRecorder) Header() http.Header         { return h.header }
func (h *headerRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (h *headerRecorder) WriteHeader(code int)        { h.status = code }

var _ http.Handler = (*server)(nil)
