package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/service/store"
)

// The error codes the API answers with, in the "code" member of an error.
const (
	CodeInvalidRequest   = "invalid_request"        // 400: the body is not one strict JSON object, a field or the query is wrong (or a request net/http cannot read: see Listener)
	CodeUnknownPolicy    = "unknown_policy"         // 400: a task names a policy the tenant has not registered
	CodeUnauthorized     = "unauthorized"           // 401: no bearer token, or an unknown one
	CodeForbidden        = "forbidden"              // 403: a state-changing request from a browser page of another origin (see console.Protect)
	CodeNotFound         = "not_found"              // 404: no such route, or no such resource for this tenant
	CodeMethodNotAllowed = "method_not_allowed"     // 405: the route exists for other methods (see Allow)
	CodeConflict         = "conflict"               // 409: exists with other content, or the wrong state for the change
	CodeTooLarge         = "body_too_large"         // 413: the body is over Config.MaxBodyBytes
	CodeUnsupportedMedia = "unsupported_media_type" // 415: a Content-Type that is not application/json
	CodeHeadersTooLarge  = "headers_too_large"      // 431: the request line and headers are over http.Server.MaxHeaderBytes (see Listener)
	CodeUnavailable      = "unavailable"            // 503: the store is out of reach or closed, or the request was cancelled
	CodeInternal         = "internal"               // 500: a fault of the service, logged; the message says nothing more
)

// FieldProblem is one problem with one field of a request.
type FieldProblem struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// APIError is an error answered to the client: Status is the HTTP status,
// and the rest is rendered as {"error": {"code", "message", "field",
// "details"}}. Field names the first faulty field, Details lists every one
// when a request had several problems.
type APIError struct {
	Status  int            `json:"-"`
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Field   string         `json:"field,omitempty"`
	Details []FieldProblem `json:"details,omitempty"`

	cause error  // what went wrong inside, for the log; never shown to the client
	allow string // a 405's Allow header
}

// Error returns the status, code, field and message on one line.
func (e *APIError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%d %s (%s): %s", e.Status, e.Code, e.Field, e.Message)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// Unwrap returns the internal cause of a 5xx, nil for a client's error.
func (e *APIError) Unwrap() error { return e.cause }

func errorf(status int, code, field, format string, args ...any) *APIError {
	return &APIError{Status: status, Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// invalid is a 400 naming one field.
func invalid(field, format string, args ...any) *APIError {
	return errorf(http.StatusBadRequest, CodeInvalidRequest, field, format, args...)
}

// fieldsError turns a list of field problems into one 400 whose field is the
// first problem's and whose message lists them all.
func fieldsError(problems []FieldProblem) *APIError {
	msgs := make([]string, len(problems))
	for i, p := range problems {
		msgs[i] = p.Field + ": " + p.Message
	}
	return &APIError{
		Status: http.StatusBadRequest, Code: CodeInvalidRequest,
		Field: problems[0].Field, Message: strings.Join(msgs, "; "), Details: problems,
	}
}

// within returns e as the error of one part of a larger request, the part
// at path (such as "tasks[3]"): its field names prefixed by path
// ("tasks[3].targetUrl"), or path itself where it named no field. e is not
// changed.
func (e *APIError) within(path string) *APIError {
	at := func(field string) string {
		if field == "" {
			return path
		}
		return path + "." + field
	}
	if len(e.Details) > 0 {
		problems := make([]FieldProblem, len(e.Details))
		for i, p := range e.Details {
			problems[i] = FieldProblem{at(p.Field), p.Message}
		}
		out := fieldsError(problems)
		out.Status, out.Code, out.cause = e.Status, e.Code, e.cause
		return out
	}
	out := *e
	out.Field = at(e.Field)
	return &out
}

// policyProblems lists what a retry.Policy decode found wrong: every
// *FieldError it holds, or the error's text when it holds none.
func policyProblems(err error) []FieldProblem {
	fes := backoff.FieldErrors(err)
	if len(fes) == 0 {
		return []FieldProblem{{Message: err.Error()}}
	}
	problems := make([]FieldProblem, len(fes))
	for i, fe := range fes {
		problems[i] = FieldProblem{Field: fe.Field, Message: fe.Reason}
	}
	return problems
}

// storeError maps a store failure to what the client sees; what is not the
// client's doing becomes a 503 whose cause is only logged. A store error of no
// known kind is almost always the store being out of reach (a restart, a
// network cut, a lock held too long), which a later try gets past: hence 503,
// not 500.
func storeError(err error, what string) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return errorf(http.StatusNotFound, CodeNotFound, "", "%s not found", what)
	case errors.Is(err, store.ErrConflict):
		return errorf(http.StatusConflict, CodeConflict, "", "%s conflicts with its current state", what)
	case errors.Is(err, store.ErrInvalid):
		return &APIError{Status: http.StatusBadRequest, Code: CodeInvalidRequest, Message: err.Error(), cause: err}
	}
	return &APIError{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "service unavailable, try again", cause: err}
}
