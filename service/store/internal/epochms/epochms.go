// Package epochms is how the SQLite and Redis stores keep times: as
// epoch milliseconds, 0 for the zero time.
package epochms

import "time"

// Of returns t in epoch milliseconds, cut to the millisecond; 0 for the
// zero time.
func Of(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// Time returns the time of v epoch milliseconds, in UTC; the zero time for
// 0.
func Time(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}
