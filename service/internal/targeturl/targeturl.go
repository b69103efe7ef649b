// Package targeturl is the one rule by which retryd cuts a task's target
// URL into the parts it names the target by: in the attempt's span
// (url.full, server.address, server.port), in the per-host limiter's key
// and metrics, and in the target host the stores keep for filters. It cuts
// the string at its delimiters instead of parsing it, for it runs on every
// attempt: the API has validated the URL (net/url) before any task holds it.
//
// The authority ends at the first '/', '?' or '#' after "scheme://", and
// userinfo is whatever comes before its last '@', as net/url has it.
package targeturl

import (
	"net"
	"strconv"
	"strings"
)

// URL is a target URL cut into parts, each a substring of it.
type URL struct {
	raw       string
	Scheme    string // as written, say "https"
	Authority string // "host", "host:port" or "[v6]:port": without userinfo
	Path      string // from the end of the authority to the query or fragment
	userinfo  bool
}

// Cut cuts raw; ok is false when raw has no "scheme://".
func Cut(raw string) (u URL, ok bool) {
	i := strings.Index(raw, "://")
	if i <= 0 {
		return URL{}, false
	}
	u = URL{raw: raw, Scheme: raw[:i]}
	rest := raw[i+len("://"):]
	if end := strings.IndexAny(rest, "?#"); end >= 0 {
		rest = rest[:end]
	}
	u.Authority = rest
	if end := strings.IndexByte(rest, '/'); end >= 0 {
		u.Authority, u.Path = rest[:end], rest[end:]
	}
	if at := strings.LastIndexByte(u.Authority, '@'); at >= 0 {
		u.Authority, u.userinfo = u.Authority[at+1:], true
	}
	return u, true
}

// Origin returns "scheme://authority": the URL without userinfo, path,
// query or fragment. It allocates only to drop userinfo.
func (u URL) Origin() string {
	if !u.userinfo {
		return u.raw[:len(u.Scheme)+len("://")+len(u.Authority)]
	}
	return u.Scheme + "://" + u.Authority
}

// Safe returns the URL without userinfo, query or fragment, which may hold
// credentials (a token in the query is common). It allocates only to drop
// userinfo.
func (u URL) Safe() string {
	if !u.userinfo {
		return u.raw[:len(u.Scheme)+len("://")+len(u.Authority)+len(u.Path)]
	}
	return u.Scheme + "://" + u.Authority + u.Path
}

// HostPort returns the authority's host, without the brackets of an IPv6
// address, and its port: the one written, or the scheme's default (443 for
// https, 80 otherwise).
func (u URL) HostPort() (host string, port int) {
	port = 80
	if strings.EqualFold(u.Scheme, "https") {
		port = 443
	}
	h, p, err := net.SplitHostPort(u.Authority)
	if err != nil {
		return strings.TrimSuffix(strings.TrimPrefix(u.Authority, "["), "]"), port
	}
	if n, err := strconv.Atoi(p); err == nil {
		port = n
	}
	return h, port
}
