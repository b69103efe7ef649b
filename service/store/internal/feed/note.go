// Package feed is what the change feeds of the shared stores (store.Feed)
// have in common: the notes that carry a due task, a line each, which
// PostgreSQL's NOTIFY and Redis's Pub/Sub messages hold alike, and Keep,
// the loop that keeps a feed's connection and reconnects when it drops.
package feed

import (
	"strconv"
	"strings"
	"time"

	"github.com/retrykit/retry/service/store"
)

// Note is the note of d: its ID, its due time in epoch milliseconds and
// its version, separated by spaces. A message holds one note or several,
// a line each. The Redis store's Lua scripts write the same form.
func Note(d store.Due) string {
	return d.ID + " " + strconv.FormatInt(d.At.UnixMilli(), 10) + " " + strconv.FormatInt(d.Version, 10)
}

// Parse reads one note; ok is false for anything else. The time and the
// version are after the last two spaces, so an ID may hold spaces (not
// line breaks). A note without a version, from an older retryd, has
// version 0, unknown. The time must be after the epoch and the version
// not negative.
func Parse(line string) (d store.Due, ok bool) {
	rest, last, ok := cutLast(line)
	if !ok || strings.Contains(line, "\n") {
		return store.Due{}, false
	}
	if id, at, ok := cutLast(rest); ok && id != "" {
		v, verr := strconv.ParseInt(last, 10, 64)
		ms, terr := strconv.ParseInt(at, 10, 64)
		if verr == nil && terr == nil {
			return due(id, ms, v)
		}
	}
	ms, err := strconv.ParseInt(last, 10, 64)
	if err != nil || rest == "" {
		return store.Due{}, false
	}
	return due(rest, ms, 0)
}

func due(id string, ms, version int64) (store.Due, bool) {
	if ms <= 0 || version < 0 {
		return store.Due{}, false
	}
	return store.Due{ID: id, At: time.UnixMilli(ms).UTC(), Version: version}, true
}

// cutLast splits s at its last space.
func cutLast(s string) (before, after string, ok bool) {
	i := strings.LastIndexByte(s, ' ')
	if i < 0 {
		return "", "", false
	}
	return s[:i], s[i+1:], true
}

// ParseMessage calls each with every note of msg, a line each, and
// returns how many lines were not notes (someone else's message on the
// channel), which it skips; blank lines are skipped without a count.
func ParseMessage(msg string, each func(store.Due)) (skipped int) {
	for line := range strings.SplitSeq(msg, "\n") {
		if d, ok := Parse(line); ok {
			each(d)
		} else if line != "" {
			skipped++
		}
	}
	return skipped
}
