package main_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry/service/servertest"
)

// TestStoreCrash is scripts/storecrash.sh's: RETRYKIT_STORE_CRASH=N
// crashes of the store's own server, every 1–3 s, under the chaos test's
// load (some 300 creates a second), with one retryd riding through them:
// a Redis of the test's own killed with kill -9, with appendfsync always
// (nothing acknowledged may be lost) and everysec (what it loses is
// counted, with how long before the kill each lost task was
// acknowledged), and a PostgreSQL cluster of the test's own (initdb in a
// temporary directory, on its own port: the shared server is never
// touched) stopped with pg_ctl stop -m immediate. Every task retryd still
// knows must end SUCCEEDED.
func TestStoreCrash(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("RETRYKIT_STORE_CRASH"))
	if n <= 0 {
		t.Skip("set RETRYKIT_STORE_CRASH=N to crash each store's server N times (scripts/storecrash.sh)")
	}
	for _, fsync := range []string{"always", "everysec"} {
		t.Run("redis-"+fsync, func(t *testing.T) {
			srv := startRedisServerFsync(t, fsync)
			storeCrash(t, "redis appendfsync="+fsync, n, srv.url(), nil, func() {
				srv.cmd.Process.Kill()
				<-srv.done
			}, srv.start, fsync == "everysec")
		})
	}
	t.Run("postgres-immediate", func(t *testing.T) {
		pg := startPrivatePostgres(t)
		storeCrash(t, "postgres stop -m immediate", n, pg.url(), nil, func() { pg.ctl("stop", "-m", "immediate") },
			func() { pg.ctl("start", "-w") }, false)
	})
}

func storeCrash(t *testing.T, name string, n int, storeURL string, flags []string, crash, restart func(), lossOK bool) {
	target := newChaosTarget(t)
	d := startDaemon(t, storeURL, append(slices.Clone(flags), "--allow-target", "127.0.0.1/32",
		"--lease", "1m", "--attempt-timeout", "30s")...)
	d.putPolicy("crash", map[string]any{"backoff": "FIXED", "initialDelayMs": 200, "jitterType": "NONE", "maxAttempts": 100})
	var url atomic.Pointer[string]
	url.Store(&d.url)
	ld := startLoad(target.URL, "crash", &url)
	var crashes []time.Time
	for range n {
		time.Sleep(time.Second + time.Duration(rand.IntN(2000))*time.Millisecond)
		crash()
		crashes = append(crashes, time.Now())
		restart()
	}
	time.Sleep(2 * time.Second)
	acked := ld.stop()
	keys, lost, stuck := checkAckedLost(t, d, acked, lossOK)
	// How long before the crash that lost it each lost task was acknowledged.
	var before time.Duration
	for _, k := range lost {
		at := acked[k].at
		i := slices.IndexFunc(crashes, func(c time.Time) bool { return !c.Before(at) })
		if i >= 0 {
			before = max(before, crashes[i].Sub(at))
		}
	}
	t.Logf("store crash, %s: %d crashes under load, %d acknowledged, %d lost (acknowledged at most %v before the crash), %d stuck",
		name, n, len(keys), len(lost), before.Round(time.Millisecond), stuck)
}

// privatePostgres is a PostgreSQL cluster of the test's own, run as the
// postgres user from a directory under /tmp, on a free loopback port.
type privatePostgres struct {
	t    *testing.T
	bin  string
	dir  string
	port int
}

func startPrivatePostgres(t *testing.T) *privatePostgres {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	u, err := user.Lookup("postgres")
	if len(bins) == 0 || err != nil || os.Geteuid() != 0 {
		servertest.Missing(t, "a private PostgreSQL needs root, a postgres user and /usr/lib/postgresql/*/bin/initdb")
	}
	slices.Sort(bins)
	dir, err := os.MkdirTemp("/tmp", "retrykit-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	pg := &privatePostgres{t: t, bin: filepath.Dir(bins[len(bins)-1]), dir: dir, port: privatePort(t)}
	pg.run("initdb", "-D", filepath.Join(dir, "data"), "-A", "trust", "-U", "postgres", "--no-sync")
	pg.ctl("start", "-w")
	t.Cleanup(func() {
		// It may be stopped already: the outcome does not matter.
		_ = exec.Command("runuser", "-u", "postgres", "--", filepath.Join(pg.bin, "pg_ctl"), "-D",
			filepath.Join(dir, "data"), "stop", "-m", "immediate").Run()
	})
	return pg
}

func (pg *privatePostgres) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", pg.port)
}

// ctl runs pg_ctl action on the cluster with args.
func (pg *privatePostgres) ctl(action string, args ...string) {
	pg.t.Helper()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1", pg.port, pg.dir)
	pg.run("pg_ctl", append([]string{"-D", filepath.Join(pg.dir, "data"), "-o", opts, "-l", filepath.Join(pg.dir, "log"), action}, args...)...)
}

// run runs one of the cluster's programs as the postgres user.
func (pg *privatePostgres) run(prog string, args ...string) {
	pg.t.Helper()
	cmd := exec.Command("runuser", append([]string{"-u", "postgres", "--", filepath.Join(pg.bin, prog)}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		pg.t.Fatalf("%s %v: %v\n%s", prog, args, err, out)
	}
}
