// Package targethost is what store.TaskFilter.TargetHost compares: the
// host of a task's target URL as url.URL.Host gives it (the host name, and
// ":port" when the URL writes one), in lower case, so that the comparison
// ignores case. The SQL stores keep it in a column of its own, indexed with
// the tenant, from the task's creation on; Redis compares it while walking
// a list.
package targethost

import (
	"net/url"
	"strings"
)

// Of returns the host of rawURL, in lower case, or "" when rawURL does not
// parse or names no host.
func Of(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	return Fold(u.Host)
}

// Fold returns host as Of keeps it: in lower case, so that a filter's host
// and a task's compare without regard to case.
func Fold(host string) string { return strings.ToLower(host) }

// Matches reports whether rawURL's host is host, without regard to case.
func Matches(rawURL, host string) bool {
	u, err := url.Parse(rawURL)
	return err == nil && strings.EqualFold(u.Host, host)
}
