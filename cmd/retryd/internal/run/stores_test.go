package run_test

import (
	"bytes"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/retrykit/retry/cmd/retryd/internal/run"
)

func TestStoreFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want run.Config
	}{
		{"postgres schema", []string{"--store", "postgres://db/x", "--schema", "retryd"}, nil,
			run.Config{Store: "postgres://db/x", Schema: "retryd"}},
		{"redis from the environment", nil, map[string]string{
			"RETRYD_STORE": "redis://127.0.0.1:6379/0", "RETRYD_PREFIX": "rk:", "RETRYD_PARTITIONS": "32",
			"RETRYD_CLAIM_PARTITIONS": "0-3, 8,10-11",
		}, run.Config{Store: "redis://127.0.0.1:6379/0", Prefix: "rk:", Partitions: 32,
			ClaimPartitions: []int{0, 1, 2, 3, 8, 10, 11}}},
		{"claim partitions repeated", []string{"--claim-partitions", "5", "--claim-partitions", "1-2"}, nil,
			run.Config{Store: run.DefaultStore, ClaimPartitions: []int{5, 1, 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := parseArgs(t, tt.args, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			got := run.Config{Store: c.Store, Schema: c.Schema, Prefix: c.Prefix, Partitions: c.Partitions,
				ClaimPartitions: c.ClaimPartitions}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestClaimPartitionErrors(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"x", "-1", "3-1", "1-", "0-99999999", "1.5", "2-x"} {
		if _, err := parseArgs(t, []string{"--claim-partitions", bad}, nil); err == nil {
			t.Errorf("--claim-partitions %q accepted, want an error", bad)
		}
	}
}

// runMain runs retryd's Main with args and no environment, returning its exit
// code and what it wrote.
func runMain(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run.Main(args, func(string) string { return "" }, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestMigrateSQLite(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "r.db")
	code, out, errOut := runMain("migrate", "--store", "sqlite://"+path)
	if code != 0 {
		t.Fatalf("retryd migrate = %d: %s", code, errOut)
	}
	if want := "sqlite://" + path + " is at schema version"; !strings.Contains(out, want) {
		t.Errorf("output %q, want it to say %q", out, want)
	}
	// Migrating again is a no-op, not an error.
	if code, _, errOut := runMain("migrate", "--store", path); code != 0 {
		t.Fatalf("second retryd migrate = %d: %s", code, errOut)
	}
}

// Mistakes about the store are usage errors (exit 2), said without
// repeating a password the command line held.
func TestStoreUsageErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown kind", []string{"--store", "mysql://u:hunter2@db/x"}, "unknown kind"},
		{"schema for sqlite", []string{"--store", filepath.Join(dir, "a.db"), "--schema", "s"}, "--schema: not used by a sqlite store"},
		{"prefix for postgres", []string{"--store", "postgres://db/x", "--prefix", "p:"}, "--prefix: not used by a postgres store"},
		{"partitions for sqlite", []string{"--store", filepath.Join(dir, "b.db"), "--partitions", "4", "--claim-partitions", "1"},
			"--partitions, --claim-partitions: not used by a sqlite store"},
		{"unparsable URL", []string{"--store", "postgres://u:hunter2@db:port/x"}, "not a valid URL"},
		{"bad claim partitions", []string{"--store", "redis://h:1/0", "--claim-partitions", "9-1"}, "not a partition number"},
	}
	for _, tt := range tests {
		for _, cmd := range []string{"serve", "migrate"} {
			t.Run(tt.name+"/"+cmd, func(t *testing.T) {
				t.Parallel()
				code, out, errOut := runMain(append([]string{cmd}, tt.args...)...)
				all := out + errOut
				if code != 2 {
					t.Errorf("exit %d, want 2; output %q", code, all)
				}
				if !strings.Contains(all, tt.want) {
					t.Errorf("output %q, want it to say %q", all, tt.want)
				}
				if strings.Contains(all, "hunter2") {
					t.Errorf("output %q shows the password", all)
				}
			})
		}
	}
}

func FuzzClaimPartitions(f *testing.F) {
	for _, s := range []string{"0", "0-15", "1,2, 3", "", ",,", "7-3", "-", "0-65535", "1-2-3", " 4 - 5 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := parseArgs(t, []string{"--claim-partitions", s}, nil)
		if err != nil {
			return
		}
		for _, p := range c.ClaimPartitions {
			if p < 0 || p > 1<<16 {
				t.Fatalf("--claim-partitions %q gave partition %d", s, p)
			}
		}
	})
}
