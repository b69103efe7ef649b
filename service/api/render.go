package api

import (
	"time"

	"github.com/retrykit/retry/service/destination"
	"github.com/retrykit/retry/service/destination/secrets"
	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/tracing"
)

// list is the shape of every list: items, and the token of the next page,
// absent on the last.
type list[T any] struct {
	Items         []T    `json:"items"`
	NextPageToken string `json:"nextPageToken,omitempty"`
}

// task is a RetryTask as the API renders it. Times are epoch milliseconds.
type task struct {
	TaskID             string            `json:"taskId"`
	IdempotencyKey     string            `json:"idempotencyKey"`
	TargetURL          string            `json:"targetUrl,omitempty"`
	DestinationID      string            `json:"destinationId,omitempty"`
	Path               *string           `json:"path,omitempty"` // with DestinationID: under its url
	Method             string            `json:"method"`
	Headers            map[string]string `json:"headers"`
	Body               *string           `json:"body,omitempty"`
	BodyBase64         []byte            `json:"bodyBase64,omitempty"`
	BodyRef            string            `json:"bodyRef,omitempty"`
	BodySize           int64             `json:"bodySize,omitempty"`
	PolicyID           string            `json:"policyId"`
	Status             store.Status      `json:"status"`
	AttemptNumber      int               `json:"attemptNumber"`
	NextAttemptAt      *int64            `json:"nextAttemptAt,omitempty"`
	CreatedAt          int64             `json:"createdAt"`
	UpdatedAt          int64             `json:"updatedAt"`
	FinishedAt         *int64            `json:"finishedAt,omitempty"`
	LastError          string            `json:"lastError,omitempty"`
	LastResponseStatus int               `json:"lastResponseStatus,omitempty"`
	Cause              string            `json:"cause,omitempty"` // a dead letter's (causeOf)
	// TraceID is the W3C trace the task's attempts belong to: its
	// creator's, or one of its own (package tracing).
	TraceID string `json:"traceId"`
}

// taskJSON renders t. A terminal task has no next attempt, so it has no
// nextAttemptAt; an empty body is neither body nor bodyBase64. A body by
// reference is its bodyRef, with its bodySize when retryd knows it (a body
// it put in the blob store), and never the body itself.
func taskJSON(t *store.Task) *task {
	out := &task{
		TaskID: t.ID, IdempotencyKey: t.IdempotencyKey, TargetURL: t.TargetURL, Method: t.Method,
		Headers: destination.MaskHeaders(t.Headers, secrets.Mask), PolicyID: t.PolicyID, Status: t.Status, AttemptNumber: t.AttemptNumber,
		CreatedAt: t.CreatedAt.UnixMilli(), UpdatedAt: t.UpdatedAt.UnixMilli(),
		FinishedAt: optMillis(t.FinishedAt), LastError: t.LastError, LastResponseStatus: t.LastStatus,
		Cause: taskCause(t), TraceID: tracing.Of(t.ID, t.Headers).TraceID.String(),
	}
	if out.Headers == nil {
		out.Headers = map[string]string{}
	}
	if id, path, ok := destination.ParseTarget(t.TargetURL); ok {
		out.TargetURL, out.DestinationID, out.Path = "", id, &path
	}
	switch {
	case t.BodyRef != "":
		out.BodyRef, out.BodySize = t.BodyRef, t.BodySize
	case t.BodyBinary:
		out.BodyBase64 = t.Body
	case len(t.Body) > 0:
		body := string(t.Body)
		out.Body = &body
	}
	if !t.Status.Terminal() {
		out.NextAttemptAt = optMillis(t.NextAttemptAt)
	}
	return out
}

func optMillis(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	ms := t.UnixMilli()
	return &ms
}

// attempt is an AttemptLog entry as the API renders it.
type attempt struct {
	TaskID         string `json:"taskId"`
	AttemptNumber  int    `json:"attemptNumber"`
	StartedAt      int64  `json:"startedAt"`
	DurationMs     int64  `json:"durationMs"`
	ResponseStatus int    `json:"responseStatus"`
	ErrorMessage   string `json:"errorMessage,omitempty"`
	ResponseBody   string `json:"responseBody,omitempty"`
	// TraceID is the task's trace; SpanID the attempt's span in it, the
	// parent its target saw. An attempt made before the task's last
	// redrive has no SpanID: its span ID came from the budget start the
	// redrive replaced, which the store does not keep.
	TraceID string `json:"traceId"`
	SpanID  string `json:"spanId,omitempty"`
}

// attemptJSON renders a, an attempt of t.
func attemptJSON(t *store.Task, a *store.Attempt) attempt {
	out := attempt{
		TaskID: a.TaskID, AttemptNumber: a.AttemptNumber, StartedAt: a.StartedAt.UnixMilli(),
		DurationMs: a.Duration.Milliseconds(), ResponseStatus: a.ResponseStatus,
		ErrorMessage: a.ErrorMessage, ResponseBody: a.ResponseBody,
		TraceID: tracing.Of(t.ID, t.Headers).TraceID.String(),
	}
	// The attempts since the budget last started are those after the last
	// redrive (or all): they start no earlier than it, those before it
	// ended before it.
	if a.StartedAt.UnixMilli() >= t.BudgetStart.UnixMilli() {
		out.SpanID = tracing.AttemptSpanID(t.ID, a.AttemptNumber, t.BudgetStart).String()
	}
	return out
}
