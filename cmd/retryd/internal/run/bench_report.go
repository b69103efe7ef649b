package run

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// benchHeader says what is measured where: the build, the machine and the
// store, so that figures can be compared with others.
func benchHeader(bs *benchStore, targetKind string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "retryd bench: build %s, %s %s/%s, GOMAXPROCS %d (%d CPUs; retryd and the bench share them)\n",
		buildRevision(), runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), runtime.NumCPU())
	fmt.Fprintf(&b, "load average before: %s\n", loadAverages())
	fmt.Fprintf(&b, "store: %s; durability: %s\n", bs.where, bs.durability)
	fmt.Fprintf(&b, "target: %s, on 127.0.0.1 in the bench process\n", targetKind)
	return b.String()
}

// buildRevision is the commit the binary was built from, as the go
// command recorded it, with "+changes" when the work tree had changes.
func buildRevision() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown (no build info)"
	}
	var rev, when, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return "unknown commit (no VCS information: go run, go test and -buildvcs=false leave it out)"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if modified == "true" {
		rev += "+changes"
	}
	if when != "" {
		rev += " (" + when + ")"
	}
	return rev
}
