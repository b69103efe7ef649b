// Package servertest holds the one rule this repository's tests follow when
// a server they need is missing (PostgreSQL, Redis, an S3 server, a browser,
// a binary to start one with): skip on a developer's machine, fail in CI.
// .ci/servers starts or installs what is missing, and .ci/run sets
// RETRYKIT_REQUIRE_SERVERS=1, so that a test skipped for want of a server
// can never pass CI unnoticed.
package servertest

import (
	"os"
	"testing"
)

// Missing skips t because of why, which should say how to provide the
// server, or fails it under RETRYKIT_REQUIRE_SERVERS=1, as .ci/run sets.
func Missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("RETRYKIT_REQUIRE_SERVERS") == "1" {
		t.Fatal(why + " (RETRYKIT_REQUIRE_SERVERS=1)")
	}
	t.Skip(why)
}
