package dispatch

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/retrykit/retry"
)

// Outcome is what a retry policy makes of a Result.
type Outcome int

// The outcomes.
const (
	Success Outcome = iota // a 2xx answer
	Retry                  // a retryable status, or no answer (network error, timeout)
	Fail                   // any other status, or a target that cannot be called
)

// String returns "success", "retry" or "fail".
func (o Outcome) String() string {
	switch o {
	case Success:
		return "success"
	case Retry:
		return "retry"
	}
	return "fail"
}

// Outcome classifies r by p: a 2xx status succeeds; a status in p's
// retryable list, a network error or a timeout is retried; any other status
// (a redirect included, since none is followed) fails, as does a refused or
// malformed target or a request that cannot be written.
func (r *Result) Outcome(p *retry.Policy) Outcome {
	switch {
	case r.Err != nil:
		if errors.Is(r.Err, ErrTargetRefused) || errors.Is(r.Err, ErrBadTarget) || errors.Is(r.Err, ErrBadRequest) {
			return Fail
		}
		return Retry
	case r.Status >= 200 && r.Status < 300:
		return Success
	case p.RetryableStatus(r.Status):
		return Retry
	}
	return Fail
}

// Message describes r for the attempt log and the task's lastError: the
// error, or the status line of a non-2xx answer; empty for a 2xx. It is
// valid UTF-8 of at most MaxMessageBytes, the Location it quotes at most
// MaxQuotedBytes, whatever r holds.
func (r *Result) Message() string {
	switch {
	case r.Err != nil:
		return bound(r.Err.Error(), MaxMessageBytes)
	case r.Status >= 200 && r.Status < 300:
		return ""
	case r.Status >= 300 && r.Status < 400:
		msg := "redirect not followed: HTTP " + strconv.Itoa(r.Status)
		if r.Location != "" {
			msg += " to " + bound(r.Location, MaxQuotedBytes)
		}
		return msg
	}
	return "HTTP " + strconv.Itoa(r.Status) + " " + http.StatusText(r.Status)
}
