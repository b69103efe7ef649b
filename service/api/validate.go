package api

import (
	"github.com/retrykit/retry/service/destination"

	"encoding/json"
	"fmt"
	"math"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
)

// Limits on what a task may carry. They keep one task's row, and the request
// the dispatcher sends, of a sane size.
const (
	MaxURLLength         = 8192
	MaxHeaders           = 64
	MaxHeaderNameLength  = 256
	MaxHeaderValueLength = 8192
	MaxIdempotencyKey    = 255
	MaxPolicyIDLength    = 128
)

// MaxNotBeforeOffset is how far a task's notBefore may lie from the
// server's clock, ahead or behind: 3,650 days, about ten years. Further
// ahead is a mistake (no one schedules a retry for 2040), and further back
// is most often seconds sent for milliseconds.
const MaxNotBeforeOffset = 3650 * 24 * time.Hour

// allowedMethods lists the HTTP methods a task may use.
const allowedMethods = "GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS"

// reservedHeader says why a task may not set the (canonical) header, or "".
// The dispatcher's HTTP client sets some; others belong to one connection.
// Idempotency-Key is the task's idempotencyKey field, sent on every attempt.
func reservedHeader(canon string) string {
	switch canon {
	case "Idempotency-Key":
		return "Idempotency-Key is set by the service from the task's idempotencyKey field; set that instead"
	case "Host", "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive",
		"Proxy-Connection", "Te", "Trailer", "Upgrade":
		return canon + " is managed by the service's HTTP client and may not be set"
	}
	return ""
}

// validName reports whether s is 1 to max letters, digits, '.', '_' or '-'.
// Policy IDs and tenants are such names, safe in a URL path and in logs.
func validName(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func checkPolicyID(id string) string {
	if !validName(id, MaxPolicyIDLength) {
		return fmt.Sprintf("must be 1 to %d letters, digits, '.', '_' or '-'", MaxPolicyIDLength)
	}
	return ""
}

// checkTaskPolicyID is checkPolicyID for a task's policyId, where "" means
// the policy "default", as leaving it out does.
func checkTaskPolicyID(id string) string {
	if id == "" {
		return ""
	}
	return checkPolicyID(id)
}

// checkTargetURL returns why u cannot be a task's target, or "".
func checkTargetURL(u string) string {
	if u == "" {
		return "is required"
	}
	if len(u) > MaxURLLength {
		return fmt.Sprintf("must be at most %d bytes", MaxURLLength)
	}
	p, err := url.Parse(u)
	if err != nil {
		return "is not a URL: " + strings.TrimPrefix(err.Error(), fmt.Sprintf("parse %q: ", u))
	}
	if s := strings.ToLower(p.Scheme); s != "http" && s != "https" {
		return "must be an http or https URL"
	}
	if p.Opaque != "" || p.Hostname() == "" {
		return "must name a host (http://host/...)"
	}
	// net/url takes any digits for a port; a dial would fail on every attempt.
	if port := p.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Sprintf("has port %s: a port is 1 to 65535", port)
		}
	}
	return ""
}

// checkTargetHost returns why h cannot be the host of a target URL as
// url.URL.Host gives it (a name or address, and a port when one is
// written), or "".
func checkTargetHost(h string) string {
	const want = "must be a host as written in a target URL: name or address, and :port if the URL has one"
	if h == "" || len(h) > MaxURLLength {
		return want
	}
	u, err := url.Parse("http://" + h)
	if err != nil || u.Host != h || u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.Hostname() == "" {
		return want
	}
	return ""
}

// checkMethod returns the method in upper case, or why it is not allowed.
func checkMethod(m string) (string, string) {
	if !httpguts.ValidHeaderFieldName(m) {
		return "", "is not an HTTP method token"
	}
	switch up := strings.ToUpper(m); up {
	case "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS":
		return up, ""
	}
	return "", "must be one of " + allowedMethods
}

// checkHeaders returns the headers with canonical names, or why not.
func checkHeaders(h map[string]string) (map[string]string, string) {
	if len(h) > MaxHeaders {
		return nil, fmt.Sprintf("at most %d headers", MaxHeaders)
	}
	out := make(map[string]string, len(h))
	for name, value := range h {
		if len(name) > MaxHeaderNameLength || !httpguts.ValidHeaderFieldName(name) {
			return nil, fmt.Sprintf("%q is not a valid header name", name)
		}
		canon := textproto.CanonicalMIMEHeaderKey(name)
		if why := reservedHeader(canon); why != "" {
			return nil, why
		}
		if _, dup := out[canon]; dup {
			return nil, fmt.Sprintf("%q is given twice (header names are case-insensitive)", canon)
		}
		if len(value) > MaxHeaderValueLength {
			return nil, fmt.Sprintf("the value of %s is over %d bytes", canon, MaxHeaderValueLength)
		}
		if !httpguts.ValidHeaderFieldValue(value) {
			return nil, fmt.Sprintf("the value of %s has a control character (CR, LF, NUL, …)", canon)
		}
		if destination.LooksSealed(value) {
			return nil, fmt.Sprintf("the value of %s begins with %q, which retryd keeps for the secrets it seals", canon, destination.SealedPrefix)
		}
		out[canon] = value
	}
	return out, ""
}

// checkKey returns why k cannot be an idempotency key, or "". A key is sent
// as a header value on every attempt, so it is visible ASCII.
func checkKey(k string) string {
	if k == "" || len(k) > MaxIdempotencyKey {
		return fmt.Sprintf("must be 1 to %d bytes", MaxIdempotencyKey)
	}
	for i := 0; i < len(k); i++ {
		if k[i] <= ' ' || k[i] >= 0x7f {
			return "must be visible ASCII (no spaces or control characters)"
		}
	}
	return ""
}

// checkNotBefore reads a notBefore member: epoch milliseconds, a whole
// number (written as JSON Schema counts integers: 5, 5.0 and 5e0 alike),
// within MaxNotBeforeOffset of now. It returns the milliseconds, or why not.
func checkNotBefore(raw json.RawMessage, now time.Time) (int64, string) {
	const want = "must be a whole number of milliseconds since the Unix epoch"
	s := string(raw)
	if s == "" || s[0] != '-' && (s[0] < '0' || s[0] > '9') {
		return 0, want
	}
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		mantissa, _, _ := strings.Cut(strings.ToLower(s), "e")
		// An underflow parses as 0: whole only when its digits are zeros.
		underflow := f == 0 && strings.Trim(mantissa, "-0.") != ""
		if ferr != nil && !math.IsInf(f, 0) || f != math.Trunc(f) || underflow {
			return 0, want
		}
		// Past ±2^62 ms (146 million years) it is refused below anyway;
		// clamping keeps the conversion defined.
		ms = int64(max(min(f, 1<<62), -(1 << 62)))
	}
	span := MaxNotBeforeOffset.Milliseconds()
	switch n := now.UnixMilli(); {
	case ms > n+span:
		return 0, fmt.Sprintf("is more than %d days ahead (at most %d)", span/86400000, n+span)
	case ms < n-span:
		return 0, fmt.Sprintf("is more than %d days in the past: milliseconds, not seconds? (omit notBefore to run at once)", span/86400000)
	}
	return ms, ""
}

// checkDestinationID is the rule of a task's destinationId, "" meaning none.
func checkDestinationID(id string) string {
	if id == "" || destination.ValidID(id) {
		return ""
	}
	return fmt.Sprintf("must be 1 to %d lower-case letters, digits, '.', '_' or '-'", destination.MaxIDLength)
}
