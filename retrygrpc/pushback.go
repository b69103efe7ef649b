package retrygrpc

import (
	"math"
	"time"

	"google.golang.org/grpc/metadata"
)

// PushbackTrailer is the trailer by which a server tells the client how long
// to wait before retrying, in milliseconds (gRFC A6).
const PushbackTrailer = "grpc-retry-pushback-ms"

// ParsePushback parses one value of the grpc-retry-pushback-ms trailer: a
// decimal count of milliseconds that fits a signed 32-bit integer (leading
// zeros allowed, no sign, no spaces). ok is false for anything else,
// negative values included, which gRFC A6 reads as the server asking the
// client not to retry at all. On success 0 ≤ d ≤ math.MaxInt32 ms.
func ParsePushback(v string) (d time.Duration, ok bool) {
	if v == "" {
		return 0, false
	}
	var ms int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		ms = ms*10 + int64(c-'0')
		if ms > math.MaxInt32 {
			return 0, false
		}
	}
	return time.Duration(ms) * time.Millisecond, true
}

type pushbackState int

const (
	pushbackNone pushbackState = iota // no trailer: the backoff decides
	pushbackWait                      // wait at least the given duration
	pushbackStop                      // the server asks not to retry
)

// pushback reads the trailer of a failed attempt. Several values are treated
// as malformed: there is no telling which one the server meant.
func pushback(trailer metadata.MD) (time.Duration, pushbackState) {
	vs := trailer[PushbackTrailer]
	switch len(vs) {
	case 0:
		return 0, pushbackNone
	case 1:
		if d, ok := ParsePushback(vs[0]); ok {
			return d, pushbackWait
		}
	}
	return 0, pushbackStop
}
