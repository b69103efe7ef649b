package dispatch

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxRetryAfter bounds a server's hint so that a silly value cannot park a
// task for centuries; the policy's maxDelayMs caps it further.
const maxRetryAfter = 365 * 24 * time.Hour

// ParseRetryAfter reads a Retry-After header value: delay-seconds (a
// non-negative integer) or an HTTP-date, taken relative to now (a date in
// the past means no wait). ok is false for an empty or malformed value.
// Huge values are capped at one year.
//
// It is local to dispatch because package retryhttp, which will own the
// library's parser, does not exist yet; switch to it when it lands.
func ParseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		secs, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			if ne, isNum := err.(*strconv.NumError); !isNum || ne.Err != strconv.ErrRange {
				return 0, false
			}
			return maxRetryAfter, true
		}
		if secs > uint64(maxRetryAfter/time.Second) {
			return maxRetryAfter, true
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d = t.Sub(now)
	switch {
	case d < 0:
		d = 0
	case d > maxRetryAfter:
		d = maxRetryAfter
	}
	return d, true
}
