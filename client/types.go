package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/retrykit/retry"
)

// Millis is a time as the API writes it: milliseconds since the Unix epoch.
// 0 means no time.
type Millis int64

// Time returns m as a time.Time, the zero Time for 0.
func (m Millis) Time() time.Time {
	if m == 0 {
		return time.Time{}
	}
	return time.UnixMilli(int64(m))
}

// MillisOf returns t in milliseconds, rounded up so that a NotBefore made
// from it is never early; 0 for the zero Time.
func MillisOf(t time.Time) Millis {
	if t.IsZero() {
		return 0
	}
	ms := t.UnixMilli()
	if time.UnixMilli(ms).Before(t) {
		ms++
	}
	return Millis(ms)
}

// Status is a task's state.
type Status string

// The task states.
const (
	Pending   Status = "PENDING"
	InFlight  Status = "IN_FLIGHT"
	Succeeded Status = "SUCCEEDED"
	Exhausted Status = "EXHAUSTED"
	Failed    Status = "FAILED"
	Cancelled Status = "CANCELLED"
)

// Policy is a named retry policy. Settings is the same retry.Policy that
// drives retry.Do in process; only its data (backoff, delays, jitter,
// maxAttempts, totalBudgetMs, callTimeMs, attemptTimeoutMs, maxRetryAfterMs,
// retryableStatusCodes) travels, not its funcs or hooks. It encodes as the API's RetryPolicy: policyId beside the
// settings' fields.
type Policy struct {
	ID       string
	Settings retry.Policy
	// Builtin is set on the service's own "default" policy, which a tenant
	// has until it registers a policy of that ID itself. It is reported,
	// never sent: PutPolicy leaves it out.
	Builtin bool
	// HostLimiter is the policy's hostLimiter, the API's HostLimiter
	// object as JSON: {"enabled":false} keeps the policy's tasks from ever
	// being held back by their target host's limiter; retry.LimiterConfig's
	// fields ({"floor":5,"ceiling":500}) give them limiters of those
	// settings. nil: retryd's own limiter of each host.
	HostLimiter json.RawMessage
}

// BuiltinPolicyID is the ID of the policy a task naming none follows.
const BuiltinPolicyID = "default"

// MarshalJSON encodes p as the API's RetryPolicy.
func (p Policy) MarshalJSON() ([]byte, error) {
	spec, err := json.Marshal(p.Settings)
	if err != nil {
		return nil, err
	}
	id, _ := json.Marshal(p.ID)
	var b bytes.Buffer
	b.WriteString(`{"policyId":`)
	b.Write(id)
	if p.Builtin {
		b.WriteString(`,"builtin":true`)
	}
	if p.HostLimiter != nil {
		b.WriteString(`,"hostLimiter":`)
		b.Write(p.HostLimiter)
	}
	b.WriteByte(',')
	b.Write(spec[1:])
	return b.Bytes(), nil
}

// UnmarshalJSON decodes the API's RetryPolicy. Fields retry.Policy does not
// know are refused, as the service refuses them.
func (p *Policy) UnmarshalJSON(data []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("retry policy: %w", err)
	}
	if m == nil {
		return errors.New("retry policy: want a JSON object, got null")
	}
	var q Policy
	if raw, ok := m["policyId"]; ok {
		if err := json.Unmarshal(raw, &q.ID); err != nil {
			return fmt.Errorf("retry policy: policyId: %w", err)
		}
		delete(m, "policyId")
	}
	if raw, ok := m["builtin"]; ok {
		if err := json.Unmarshal(raw, &q.Builtin); err != nil {
			return fmt.Errorf("retry policy: builtin: %w", err)
		}
		delete(m, "builtin")
	}
	if raw, ok := m["hostLimiter"]; ok {
		if string(raw) != "null" {
			q.HostLimiter = raw
		}
		delete(m, "hostLimiter")
	}
	rest, _ := json.Marshal(m)
	if err := json.Unmarshal(rest, &q.Settings); err != nil {
		return err
	}
	*p = q
	return nil
}

// TaskRequest asks for a retry task. TargetURL is required unless
// DestinationID names one of the tenant's destinations (see Destination):
// the task then goes to that destination's URL followed by Path ("/orders",
// "?id=7", or "" for the URL itself), or to TargetURL if it is given instead
// of Path and starts with the destination's URL. Such a task keeps the
// destination's ID and its path, not the URL, so that a change of the
// destination reaches it; its attempts carry the destination's auth,
// headers and signature. An empty PolicyID means the policy "default": the tenant's own, if it registered
// one under that ID, else the service's built-in (see BuiltinPolicyID).
// Method defaults to POST; give Body (text), BodyBase64 (bytes) or BodyRef,
// one at most. An empty IdempotencyKey makes the service generate one.
//
// A large body may be given inline: with a blob store, the service keeps a
// body of over 64 KiB (its --blob-threshold) there, taking requests of up to
// 64 MiB (--max-body), and the Task shows BodyRef and BodySize instead of the
// body. (CreateTask encodes the whole request in memory; the service does
// not.) BodyRef names a body the caller uploaded itself, s3://bucket/key,
// which the service reads at each attempt; the tenant may name only the
// buckets and prefixes its operator allowed it.
//
// NotBefore, when not 0, holds the first attempt until then (use MillisOf);
// a time already past means at once. The policy's time budget counts from
// then, not from the task's creation. The service refuses a NotBefore more
// than about ten years from its clock. It is part of the request an
// IdempotencyKey stands for, and is not reported back apart: the task's
// NextAttemptAt shows it until the first attempt.
type TaskRequest struct {
	TargetURL      string            `json:"targetUrl,omitempty"`
	DestinationID  string            `json:"destinationId,omitempty"`
	Path           string            `json:"path,omitempty"`
	Method         string            `json:"method,omitempty"`
	Headers        map[string]string `json:"headers,omitempty"`
	Body           string            `json:"body,omitempty"`
	BodyBase64     []byte            `json:"bodyBase64,omitempty"`
	BodyRef        string            `json:"bodyRef,omitempty"`
	PolicyID       string            `json:"policyId,omitempty"`
	IdempotencyKey string            `json:"idempotencyKey,omitempty"`
	NotBefore      Millis            `json:"notBefore,omitempty"`
}

// MaxBatch is the most tasks CreateTasks may send at once.
const MaxBatch = 1000

// TaskResult is the service's answer for one task of CreateTasks: Status
// is what CreateTask would have got, 201 (created) or 200 (a repeat of an
// earlier request with the same IdempotencyKey) with Task, or 400 (invalid,
// or an unknown policy) or 409 (the IdempotencyKey names another request)
// with Error, whose Field is named from the batch's root
// ("tasks[3].targetUrl").
type TaskResult struct {
	Status int    `json:"status"`
	Task   *Task  `json:"task,omitempty"`
	Error  *Error `json:"error,omitempty"`
}

// Created reports whether this call created the task.
func (r TaskResult) Created() bool { return r.Status == http.StatusCreated }

// Err returns the task's refusal, nil when it was created or repeated. It
// matches ErrInvalid or ErrConflict as a CreateTask error would.
func (r TaskResult) Err() error {
	if r.Error == nil {
		return nil
	}
	return r.Error
}

// Task is a retry task as the service reports it. A task of a destination
// has its DestinationID and Path, and no TargetURL: the URL it goes to is
// the destination's, as it is at each attempt, followed by Path.
//
// The values of headers that carry credentials read "••••": those of
// Authorization, Proxy-Authorization and Cookie, and of the headers the
// operator has the service seal. The service sends them as given.
type Task struct {
	TaskID             string            `json:"taskId"`
	IdempotencyKey     string            `json:"idempotencyKey"`
	TargetURL          string            `json:"targetUrl,omitempty"`
	DestinationID      string            `json:"destinationId,omitempty"`
	Path               string            `json:"path,omitempty"` // with DestinationID: what follows the destination's URL
	Method             string            `json:"method"`
	Headers            map[string]string `json:"headers"`
	Body               string            `json:"body,omitempty"`       // the body, given as text, when the task holds it itself
	BodyBase64         []byte            `json:"bodyBase64,omitempty"` // the body, given as bytes, when the task holds it itself
	BodyRef            string            `json:"bodyRef,omitempty"`    // where the body is when held by reference (the body is then not shown)
	BodySize           int64             `json:"bodySize,omitempty"`   // the size of a body the service moved to its blob store; 0 for a caller's BodyRef
	PolicyID           string            `json:"policyId"`
	Status             Status            `json:"status"`
	AttemptNumber      int               `json:"attemptNumber"`           // attempts made so far
	NextAttemptAt      Millis            `json:"nextAttemptAt,omitempty"` // 0 once terminal; the NotBefore asked for until the first attempt
	CreatedAt          Millis            `json:"createdAt"`
	UpdatedAt          Millis            `json:"updatedAt"`
	FinishedAt         Millis            `json:"finishedAt,omitempty"`         // 0 until terminal
	LastError          string            `json:"lastError,omitempty"`          // why the last attempt failed
	LastResponseStatus int               `json:"lastResponseStatus,omitempty"` // 0 when none
	// Cause groups a dead letter (EXHAUSTED or FAILED) with others that
	// failed alike: "HTTP 503", "timeout", "connection refused", … (see
	// Client.DeadLetterCauses); empty for a task in another state.
	Cause string `json:"cause,omitempty"`
}

// Attempt is one entry of a task's attempt log.
type Attempt struct {
	TaskID         string `json:"taskId"`
	AttemptNumber  int    `json:"attemptNumber"`
	StartedAt      Millis `json:"startedAt"`
	DurationMs     int64  `json:"durationMs"`
	ResponseStatus int    `json:"responseStatus"` // 0 when no response came
	ErrorMessage   string `json:"errorMessage,omitempty"`
	ResponseBody   string `json:"responseBody,omitempty"` // the first bytes of the response
}

// Page is one page of a list. NextPageToken is empty on the last page;
// otherwise pass it as the next request's PageToken.
type Page[T any] struct {
	Items         []T    `json:"items"`
	NextPageToken string `json:"nextPageToken,omitempty"`
}

// ListOptions selects a page: PageToken from the previous page (empty for
// the first) and Limit items (0 for the service's default, 100; at most
// 1000).
type ListOptions struct {
	PageToken string
	Limit     int
}

// TaskQuery filters ListTasks: tasks in any of Statuses (all when empty),
// and, for each other field that is not empty, of that PolicyID, whose
// target's host (host[:port] as in the URL, any case) is TargetHost, of
// destination DestinationID (not with TargetHost), with that
// IdempotencyKey, and whose Cause is Cause (dead letters only). A
// destination's dead letters are its tasks in EXHAUSTED and FAILED.
//
// With Cause, the service filters as it reads pages of the store, and a
// page may hold fewer than Limit tasks, or none, and still have a
// NextPageToken: go on until it is empty.
type TaskQuery struct {
	Statuses       []Status
	PolicyID       string
	TargetHost     string
	DestinationID  string
	IdempotencyKey string
	Cause          string
	ListOptions
}
