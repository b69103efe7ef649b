package run_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry/cmd/retryd/internal/run"
)

func parseArgs(t *testing.T, args []string, env map[string]string) (run.Config, error) {
	t.Helper()
	return run.ParseConfig(args, func(k string) string { return env[k] }, io.Discard)
}

func TestFlagsAndEnvironment(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		args  []string
		env   map[string]string
		check func(t *testing.T, c run.Config)
	}{
		{"defaults", nil, nil, func(t *testing.T, c run.Config) {
			if c.Listen != "127.0.0.1:8080" || c.Store != "./retryd.db" || c.LogFormat != "text" || c.AllowPrivate || len(c.AllowTargets) != 0 {
				t.Fatalf("defaults %+v", c)
			}
		}},
		{"environment fills in", nil, map[string]string{
			"RETRYD_LISTEN": "127.0.0.1:9", "RETRYD_STORE": "sqlite:///tmp/x.db", "RETRYD_WORKERS": "7",
			"RETRYD_LEASE": "90s", "RETRYD_COMMIT_WAIT": "2ms", "RETRYD_TOKENS_FILE": "/etc/tokens",
			"RETRYD_ALLOW_PRIVATE_TARGETS": "true", "RETRYD_ALLOW_TARGET": "10.0.0.0/8, 192.168.1.7", "RETRYD_LOG_FORMAT": "json",
		}, func(t *testing.T, c run.Config) {
			want := run.Config{Listen: "127.0.0.1:9", Store: "sqlite:///tmp/x.db", Workers: 7, Lease: 90 * time.Second,
				CommitWait: 2 * time.Millisecond, TokensFile: "/etc/tokens", AllowPrivate: true, LogFormat: "json",
				AllowTargets: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.1.7/32")}}
			got := run.Config{Listen: c.Listen, Store: c.Store, Workers: c.Workers, Lease: c.Lease, CommitWait: c.CommitWait,
				TokensFile: c.TokensFile, AllowPrivate: c.AllowPrivate, LogFormat: c.LogFormat, AllowTargets: c.AllowTargets}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %+v, want %+v", got, want)
			}
		}},
		{"command line wins", []string{"--listen", "127.0.0.1:1", "--allow-target", "127.0.0.1/32", "--allow-target", "::1"},
			map[string]string{"RETRYD_LISTEN": "127.0.0.1:9", "RETRYD_ALLOW_TARGET": "10.0.0.0/8"}, func(t *testing.T, c run.Config) {
				want := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128")}
				if c.Listen != "127.0.0.1:1" || !reflect.DeepEqual(c.AllowTargets, want) {
					t.Fatalf("listen %q, allow %v; want the command line's", c.Listen, c.AllowTargets)
				}
			}},
		{"commit wait defaults and may be 0", []string{"--commit-wait", "0"}, nil, func(t *testing.T, c run.Config) {
			if c.CommitWait != 0 {
				t.Fatalf("--commit-wait 0 gave %v", c.CommitWait)
			}
			if d, _ := parseArgs(t, nil, nil); d.CommitWait != 5*time.Millisecond {
				t.Fatalf("default commit wait %v, want 5ms", d.CommitWait)
			}
		}},
		{"cidr masked", []string{"--allow-target", "10.1.2.3/8"}, nil, func(t *testing.T, c run.Config) {
			if got := c.AllowTargets[0].String(); got != "10.0.0.0/8" {
				t.Fatalf("allow %s, want 10.0.0.0/8", got)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := parseArgs(t, tt.args, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

func TestFlagErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"bad cidr", []string{"--allow-target", "ten/8"}, nil},
		{"bad cidr in environment", nil, map[string]string{"RETRYD_ALLOW_TARGET": "nope"}},
		{"bad duration in environment", nil, map[string]string{"RETRYD_LEASE": "soon"}},
		{"commit wait over the bound", []string{"--commit-wait", "101ms"}, nil},
		{"negative commit wait in environment", nil, map[string]string{"RETRYD_COMMIT_WAIT": "-1ms"}},
		{"stray argument", []string{"extra"}, nil},
		{"unknown flag", []string{"--frobnicate"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := parseArgs(t, tt.args, tt.env); err == nil {
				t.Fatalf("parse(%q, %v) = nil, want an error", tt.args, tt.env)
			}
		})
	}
}

func TestRefusesPublicListenWithoutTokens(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	for addr, refused := range map[string]bool{
		"127.0.0.1:0": false, "localhost:0": false, "[::1]:0": false,
		"0.0.0.0:0": true, ":0": true, "[::]:0": true, "192.0.2.1:0": true,
	} {
		c, err := run.ParseConfig([]string{"--listen", addr, "--store", filepath.Join(t.TempDir(), "r.db")}, func(string) string { return "" }, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		ready := make(chan net.Addr, 1)
		done := make(chan error, 1)
		go func() { done <- run.Serve(ctx, c, log, ready) }()
		select {
		case err = <-done:
		case <-ready:
			cancel()
			err = <-done
		}
		cancel()
		if gotRefused := err != nil && strings.Contains(err.Error(), "without --tokens-file"); gotRefused != refused {
			t.Errorf("Serve on %s = %v; want refused %v", addr, err, refused)
		}
	}
}

func FuzzAllowTarget(f *testing.F) {
	for _, s := range []string{"10.0.0.0/8", "::1", "1.2.3.4,5.6.7.8/30", "", ",,", "300.1.1.1/8", "fe80::/10"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := run.ParseConfig([]string{"--allow-target", s}, func(string) string { return "" }, io.Discard)
		if err != nil {
			return
		}
		for _, p := range c.AllowTargets {
			if !p.IsValid() || p != p.Masked() {
				t.Fatalf("Set(%q) gave %v", s, p)
			}
		}
	})
}
