package api

import (
	"strconv"
	"strings"

	"github.com/retrykit/retry/service/destination/gate"
	"github.com/retrykit/retry/service/dispatch"
	"github.com/retrykit/retry/service/store"
)

// The causes of dead letters that are no response status: what retryd's
// dispatcher and store write as a task's lastError, put in classes an
// operator acts on alike.
const (
	causeTimeout        = "timeout"
	causeRefused        = "connection refused"
	causeReset          = "connection reset"
	causeDNS            = "DNS"
	causeTLS            = "TLS"
	causeLeaseExpired   = "lease expired"
	causeTargetRefused  = "target not allowed"
	causeBodyGone       = "body unavailable"
	causeCredentials    = "credentials"
	causeDestination    = "destination"
	causeOther          = "other error"
	causeHTTPPrefix     = "HTTP "
	maxCauseQueryLength = len(causeHTTPPrefix) + 3
)

// errorCauses are the classes of lastError, tried in order, each with the
// texts that mark it (lower case). The order matters where a message holds
// two: a failed DNS lookup that timed out is DNS, a reclaimed lease
// ("lease expired…") whose task then ran out of attempts is still the lost
// lease.
var errorCauses = []struct {
	cause string
	marks []string
}{
	{causeLeaseExpired, []string{strings.ToLower(store.LeaseExpiredMessage)}},
	// A destination's OAuth2 token endpoint failed, however (refused,
	// timed out, an error answer): the credentials are what to look at.
	{causeCredentials, []string{strings.ToLower(gate.ErrToken.Error()) + ":"}},
	// The destination is gone, or what it holds could not be used.
	{causeDestination, []string{strings.ToLower(gate.ErrGone.Error()), "names a destination, and this retryd has none",
		strings.ToLower(dispatch.ErrSign.Error()), "a sealed header does not open"}},
	// The SSRF guard's refusal, wherever the dial wraps it.
	{causeTargetRefused, []string{dispatch.ErrTargetRefused.Error()}},
	// A body by reference that could not be read: the dispatcher's
	// bodyError reads "body <ref>: …".
	{causeBodyGone, []string{dispatch.ErrNoBlobStore.Error(), "body blob:", "body s3://", "body ("}},
	{causeDNS, []string{"no such host", "lookup ", "server misbehaving"}},
	{causeTLS, []string{"tls:", "x509:", "certificate"}},
	{causeRefused, []string{"connection refused"}},
	// The target dropped the connection: reset, or closed before it
	// answered (the dispatcher's own words), or a write to a closed one.
	{causeReset, []string{"connection reset", "connection closed before an answer came", "broken pipe"}},
	// context.DeadlineExceeded, net's "i/o timeout", fasthttp's "timeout"
	// and "… timed out".
	{causeTimeout, []string{"deadline exceeded", "timeout", "timed out"}},
}

// causeOf names why a dead letter failed, from its last response status
// (when there was one: "HTTP 503") or else its last error: one of the
// classes above, or "other error". It is the one place a cause is made:
// task JSON, GET /dead-letters/causes and the cause filters all use it.
func causeOf(lastStatus int, lastError string) string {
	if lastStatus != 0 {
		return causeHTTPPrefix + strconv.Itoa(lastStatus)
	}
	msg := strings.ToLower(lastError)
	for _, c := range errorCauses {
		for _, m := range c.marks {
			if strings.Contains(msg, m) {
				return c.cause
			}
		}
	}
	return causeOther
}

// taskCause is t's cause when it is a dead letter, else "".
func taskCause(t *store.Task) string {
	if t.Status != store.Exhausted && t.Status != store.Failed {
		return ""
	}
	return causeOf(t.LastStatus, t.LastError)
}

// checkCause returns why s is no cause causeOf makes, or "". A typo should
// not quietly match nothing.
func checkCause(s string) string {
	if code, ok := strings.CutPrefix(s, causeHTTPPrefix); ok {
		if n, err := strconv.Atoi(code); err == nil && n >= 100 && n <= 999 && len(s) <= maxCauseQueryLength {
			return ""
		}
	}
	if s == causeOther {
		return ""
	}
	for _, c := range errorCauses {
		if s == c.cause {
			return ""
		}
	}
	return `must be "HTTP <status>" or one of "timeout", "connection refused", "connection reset", "DNS", "TLS", ` +
		`"lease expired", "target not allowed", "body unavailable", "credentials", "destination", "other error"`
}
