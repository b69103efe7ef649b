// Package targethost is what store.TaskFilter.TargetHost compares: the
// authority of a task's target URL (the host, and ":port" when the URL
// writes one; package targeturl's rule, which the per-host limiter and the
// attempt spans follow too), in lower case, so that the comparison ignores
// case. The SQL stores keep it in a column of its own, indexed with the
// tenant, from the task's creation on; Redis compares it while walking a
// list.
package targethost

import (
	"strings"

	"github.com/retrykit/retry/service/internal/targeturl"
)

// Of returns the host of rawURL, in lower case, or "" when rawURL has no
// "scheme://".
func Of(rawURL string) string {
	u, ok := targeturl.Cut(rawURL)
	if !ok {
		return ""
	}
	return Fold(u.Authority)
}

// Fold returns host as Of keeps it: in lower case, so that a filter's host
// and a task's compare without regard to case.
func Fold(host string) string { return strings.ToLower(host) }

// Matches reports whether rawURL's host is host, without regard to case.
func Matches(rawURL, host string) bool {
	u, ok := targeturl.Cut(rawURL)
	return ok && strings.EqualFold(u.Authority, host)
}
