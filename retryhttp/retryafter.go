package retryhttp

import (
	"math"
	"net/http"
	"strings"
	"time"
)

// maxDelaySeconds is the largest delta-seconds that fits in a Duration.
const maxDelaySeconds = math.MaxInt64 / int64(time.Second)

// ParseRetryAfter parses the value of a Retry-After header, in either of its
// forms: delta-seconds ("120") or an HTTP-date ("Wed, 21 Oct 2015 07:28:00
// GMT", or the obsolete RFC 850 and asctime forms), the latter measured from
// now. ok is false for an empty, malformed or negative value, which callers
// ignore. A date in the past gives 0 (no wait) and ok true; a number of
// seconds too large for a Duration gives the largest Duration. It never
// allocates on the delta-seconds path and is safe for concurrent use.
func ParseRetryAfter(value string, now time.Time) (d time.Duration, ok bool) {
	v := strings.TrimSpace(value)
	if v == "" {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		return parseSeconds(v)
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	if d = t.Sub(now); d < 0 {
		d = 0
	}
	return d, true
}

// parseSeconds reads 1*DIGIT by hand: strconv would accept a sign, and a
// huge value must saturate rather than be refused.
func parseSeconds(v string) (time.Duration, bool) {
	var secs int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if secs <= maxDelaySeconds {
			secs = secs*10 + int64(c-'0')
		}
	}
	if secs > maxDelaySeconds {
		return time.Duration(math.MaxInt64), true
	}
	return time.Duration(secs) * time.Second, true
}
