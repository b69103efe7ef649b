package store

import "strings"

// HeldError returns the LastError of a task handed back unsent because
// why ("target overloaded", "rate limit", "paused"…): the error of its
// last attempt followed by "(held: why)", or "held: why" alone when there
// was none. A task held again, for this reason or another, says only the
// latest, once.
func HeldError(last, why string) string {
	msg := "held: " + why
	if i := strings.LastIndex(last, " (held: "); i >= 0 && strings.HasSuffix(last, ")") {
		last = last[:i]
	}
	if last == "" || strings.HasPrefix(last, "held: ") {
		return msg
	}
	return last + " (" + msg + ")"
}
