package dispatch

import (
	"strings"
	"unicode/utf8"
)

// Bounds on the strings of a Result that a target controls, so that what
// an attempt's log entry and its task's lastError keep, what the API
// answers and what logs print stay small whatever a target sends: a
// Location header, a status line, a certificate's names or an HTTP/2
// GOAWAY's debug data can each run to megabytes. The response body is
// bounded by Config.KeepBytes.
const (
	// MaxQuotedBytes bounds a response header value that a Result keeps
	// and its Message quotes: Location.
	MaxQuotedBytes = 256
	// MaxMessageBytes bounds Result.Message and the text of Result.Err.
	MaxMessageBytes = 2 << 10
)

// ellipsis ends a string that bound cut.
const ellipsis = "…"

// bound returns s as valid UTF-8 (each run of invalid bytes becoming
// U+FFFD) of at most max bytes, max being at least len(ellipsis): a longer
// s is cut on a character boundary and ends with ellipsis.
func bound(s string, max int) string {
	if len(s) <= max && utf8.ValidString(s) {
		return s
	}
	// Replacing an invalid byte can triple it: four times max is more
	// than enough input for max bytes out, however it is made.
	whole := len(s) <= 4*max
	t := strings.ToValidUTF8(s[:min(len(s), 4*max)], "\uFFFD")
	if whole && len(t) <= max {
		return t
	}
	return cutUTF8(t, max-len(ellipsis)) + ellipsis
}

// cutUTF8 returns the longest prefix of s, valid UTF-8, that has at most
// max bytes and ends on a character boundary.
func cutUTF8(s string, max int) string {
	if len(s) <= max {
		return s
	}
	for max > 0 && !utf8.RuneStart(s[max]) {
		max--
	}
	return s[:max]
}

// boundedError is an error whose text bound cut; it wraps the original,
// so that errors.Is and errors.As see through it.
type boundedError struct {
	msg string
	err error
}

func (e *boundedError) Error() string { return e.msg }
func (e *boundedError) Unwrap() error { return e.err }

// boundErr returns err, or when its text is over MaxMessageBytes or not
// valid UTF-8, err with that text bounded.
func boundErr(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if b := bound(msg, MaxMessageBytes); b != msg {
		return &boundedError{b, err}
	}
	return err
}
