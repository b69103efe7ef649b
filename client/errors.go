package client

import (
	"errors"
	"fmt"
	"net/http"
)

// Errors an *Error matches with errors.Is, by its HTTP status.
var (
	ErrInvalid      = errors.New("invalid request") // 400, 413, 415
	ErrUnauthorized = errors.New("unauthorized")    // 401
	ErrNotFound     = errors.New("not found")       // 404
	ErrConflict     = errors.New("conflict")        // 409
)

// FieldProblem is one problem with one field of a request.
type FieldProblem struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error is an error answer of the service. Code, Message and Field are the
// API's error object (see the service's openapi.yaml for the codes);
// Details lists every field problem when a request had several. An answer
// that was not the API's JSON error (from a proxy, say) has an empty Code
// and the start of the body as its Message.
type Error struct {
	StatusCode int            `json:"-"` // the HTTP status, or a batch item's status; not part of the API's error object
	Code       string         `json:"code"`
	Message    string         `json:"message"`
	Field      string         `json:"field,omitempty"`
	Details    []FieldProblem `json:"details,omitempty"`
}

// Error returns the status, code, field and message on one line.
func (e *Error) Error() string {
	s := fmt.Sprintf("retryd: %d", e.StatusCode)
	if e.Code != "" {
		s += " " + e.Code
	}
	if e.Field != "" {
		s += " (" + e.Field + ")"
	}
	return s + ": " + e.Message
}

// Is reports whether target is the sentinel matching e's status.
func (e *Error) Is(target error) bool {
	switch e.StatusCode {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
		return target == ErrInvalid
	case http.StatusUnauthorized:
		return target == ErrUnauthorized
	case http.StatusNotFound:
		return target == ErrNotFound
	case http.StatusConflict:
		return target == ErrConflict
	}
	return false
}
