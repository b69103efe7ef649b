package destination

import (
	"net/url"
	"strings"
)

// targetPrefix starts the TargetURL of a task that names a destination:
// "destination://<id>:0/<path>". The task keeps the destination's ID and
// its own path, never the destination's URL, so that a change of the URL
// reaches it. The ID sits where a host would, so that filters by target
// host find a destination's tasks, with port 0, which no other task's
// target can have (the API refuses it), so that they find nothing else.
const (
	targetPrefix = "destination://"
	targetPort   = ":0"
)

// Target returns the TargetURL kept by a task of destination id whose
// attempts go to the destination's URL followed by path.
func Target(id, path string) string {
	return targetPrefix + id + targetPort + "/" + path
}

// ParseTarget splits a TargetURL that Target made into the destination's
// ID and the task's path; ok is false for any other URL.
func ParseTarget(target string) (id, path string, ok bool) {
	rest, ok := strings.CutPrefix(target, targetPrefix)
	if !ok {
		return "", "", false
	}
	host, path, ok := strings.Cut(rest, "/")
	id, port := strings.CutSuffix(host, targetPort)
	if !ok || !port || !ValidID(id) {
		return "", "", false
	}
	return id, path, true
}

// IsTarget reports whether a task's TargetURL names a destination.
func IsTarget(target string) bool { return strings.HasPrefix(target, targetPrefix) }

// HostOf returns the target host (as store.TaskFilter.TargetHost compares
// it) of the tasks of destination id.
func HostOf(id string) string { return id + targetPort }

// CheckPath returns why path cannot follow base, a destination's URL, or "":
// the URL they make must be base's host and a valid URL. A path starts with
// '/' or '?', or anything when base ends with '/'.
func CheckPath(base, path string) string {
	if len(base)+len(path) > MaxURLLength {
		return "makes a URL longer than the limit of the destination's url"
	}
	if path != "" && path[0] != '/' && path[0] != '?' && !strings.HasSuffix(base, "/") {
		return "must start with '/' or '?'"
	}
	if strings.ContainsAny(path, " \t\r\n#") {
		return "may not hold spaces, control characters or a fragment"
	}
	b, err1 := url.Parse(base)
	u, err2 := url.Parse(base + path)
	if err1 != nil || err2 != nil || u.Host != b.Host || u.Scheme != b.Scheme || u.User != nil {
		return "does not make a URL under the destination's url"
	}
	return ""
}

// PathUnder returns the path of target under base, a destination's URL,
// when target starts with it and the rest is a valid path.
func PathUnder(base, target string) (string, bool) {
	path, ok := strings.CutPrefix(target, base)
	if !ok || CheckPath(base, path) != "" {
		return "", false
	}
	return path, true
}

// Resolve returns the URL an attempt of a task whose path is path goes to.
func (d *Destination) Resolve(path string) string { return d.URL + path }
