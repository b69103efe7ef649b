package main_test

import (
	"context"
	"net/url"
	"os/exec"
	"strings"
	"testing"

	"github.com/retrykit/retry/service/store/postgres"
	"github.com/retrykit/retry/service/store/postgres/pgtest"
)

// withPassword returns the test server's URL with a password in it, and
// the password: the configured one, or one the trust-authenticated test
// server ignores.
func withPassword(t *testing.T) (string, string) {
	t.Helper()
	u, err := url.Parse(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	if pw, ok := u.User.Password(); ok {
		return u.String(), pw
	}
	u.User = url.UserPassword(u.User.Username(), "s3cret-pw")
	return u.String(), "s3cret-pw"
}

// retryd migrate creates the tables in an empty schema and says so, and
// neither it nor a retryd serving from the store shows the password of
// the URL it was given.
func TestMigrateThenServePostgres(t *testing.T) {
	t.Parallel()
	schema := pgtest.Schema(t, "retryd_test_")
	dsn, pw := withPassword(t)
	out, err := exec.Command(binary, "migrate", "--store", dsn, "--schema", schema).CombinedOutput()
	if err != nil {
		t.Fatalf("retryd migrate: %v\n%s", err, out)
	}
	if strings.Contains(string(out), pw) {
		t.Errorf("retryd migrate shows the password: %s", out)
	}
	if !strings.Contains(string(out), "schema version") {
		t.Errorf("retryd migrate said %q, want the schema version", out)
	}
	conn := pgtest.Admin(t)
	defer conn.Close(context.Background())
	var version int
	err = conn.QueryRow(context.Background(), "SELECT max(version) FROM "+schema+".retry_schema_migrations").Scan(&version)
	if err != nil || version != postgres.SchemaVersion() {
		t.Fatalf("after retryd migrate the schema is at version %d (%v), want %d", version, err, postgres.SchemaVersion())
	}

	d := startDaemon(t, dsn, "--schema", schema)
	d.putPolicy("p", quick)
	if got := probe(d, "/readyz"); got != 200 {
		t.Errorf("/readyz = %d, want 200", got)
	}
	if log := d.log(); strings.Contains(log, pw) || !strings.Contains(log, "schema "+schema) {
		t.Errorf("retryd's log shows the password, or not the store's schema:\n%s", log)
	}
}
