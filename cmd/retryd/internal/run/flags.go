// Package run is retryd's command line: flags with RETRYD_* environment
// fallbacks, the wiring of store, dispatcher, scheduler, API and metrics,
// and the bench command.
package run

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/retrykit/retry/service/dispatch"
	"github.com/retrykit/retry/service/metrics"
	"github.com/retrykit/retry/service/scheduler"
)

// Defaults of the serve flags.
const (
	DefaultListen = "127.0.0.1:8080"
	DefaultStore  = "./retryd.db"
)

// Config is what the serve flags say.
type Config struct {
	Listen          string
	Store           string
	Schema          string // PostgreSQL schema of the tables
	Prefix          string // Redis key prefix
	Partitions      int    // Redis partitions (recorded by the first instance)
	ClaimPartitions []int  // Redis partitions this instance claims from; nil means all
	Workers         int
	Lease           time.Duration
	CommitWait      time.Duration // scheduler.Config.CommitWait
	TokensFile      string
	// MetricsListen, when set, is where /metrics (and the probes) are
	// served, and no longer on Listen.
	MetricsListen string
	// MetricsTokenFile holds the bearer tokens that read /metrics.
	MetricsTokenFile string
	// MetricsMaxPolicies and MetricsMaxPoliciesPerTenant bound the policy
	// labels of retry_attempts_total (metrics.Limits).
	MetricsMaxPolicies          int
	MetricsMaxPoliciesPerTenant int
	// MetricsMaxDestinations and MetricsMaxDestinationsPerTenant bound
	// the destination labels of retry_destination_* (metrics.Limits).
	MetricsMaxDestinations          int
	MetricsMaxDestinationsPerTenant int
	AllowPrivate                    bool
	AllowTargets                    []netip.Prefix
	Insecure                        bool
	LogFormat                       string
	LogLevel                        string
	AttemptTimeout                  time.Duration
	ConnectTimeout                  time.Duration
	ShutdownGrace                   time.Duration
	Retention                       time.Duration // how long finished tasks are kept (sweep.go); 0 for ever
	BlobConfig                                    // --blobs and the flags of large bodies (blobs.go)
	HostLimitConfig                               // --host-limiter and its settings (hostlimit.go)
	SecretsConfig                                 // --secrets-key-file and the destinations' bounds (destinations.go)
	// Getenv reads the standard OTEL_* variables that turn span export on
	// (tracing.go); nil leaves it off.
	Getenv func(string) string
}

// commitWait is the --commit-wait flag: a duration from 0 to
// maxCommitWait.
type commitWait struct{ d *time.Duration }

// maxCommitWait bounds --commit-wait: every outcome waiting is one a crash
// makes retryd try again.
const maxCommitWait = 100 * time.Millisecond

func (v commitWait) String() string {
	if v.d == nil {
		return ""
	}
	return v.d.String()
}

func (v commitWait) Set(s string) error {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return err
	case d < 0 || d > maxCommitWait:
		return fmt.Errorf("%v is not within 0 and %v", d, maxCommitWait)
	}
	*v.d = d
	return nil
}

// prefixes is a repeatable CIDR flag.
type prefixes struct{ p *[]netip.Prefix }

func (v prefixes) String() string {
	if v.p == nil {
		return ""
	}
	s := make([]string, len(*v.p))
	for i, p := range *v.p {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

// Set takes one CIDR, or several separated by commas (as the environment
// variable carries them). A bare address counts as a /32 or /128.
func (v prefixes) Set(s string) error {
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			a, aerr := netip.ParseAddr(part)
			if aerr != nil {
				return fmt.Errorf("%q is not a CIDR (like 10.0.0.0/8) or an IP address", part)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		*v.p = append(*v.p, p.Masked())
	}
	return nil
}

// newFlagSet defines the serve flags on a new FlagSet writing usage to w.
func newFlagSet(name string, c *Config, w io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(w)
	fs.StringVar(&c.Listen, "listen", DefaultListen, "address to serve the API on (`host:port`)")
	storeFlags(fs, c)
	blobFlags(fs, &c.BlobConfig)
	fs.IntVar(&c.Workers, "workers", scheduler.DefaultWorkers, "attempts in flight at once")
	fs.DurationVar(&c.Lease, "lease", scheduler.DefaultLease, "how long a claimed task is held before another worker may take it")
	c.CommitWait = scheduler.DefaultCommitWait
	fs.Var(commitWait{&c.CommitWait}, "commit-wait",
		"how long an attempt's outcome may wait for others to share its durable write, 0 to "+maxCommitWait.String()+
			" (one that makes its task due soon waits at most "+scheduler.SoonCommitWait.String()+"; 0 writes each at once); "+
			"longer writes less per attempt, but a crash loses more outcomes not yet written, whose attempts are then made again")
	fs.StringVar(&c.TokensFile, "tokens-file", "", "file of \"TOKEN TENANT [s3://bucket/prefix/…]\" lines (the prefixes: where the tenant's bodyRefs may point); without it authentication is off (with it, /metrics needs --metrics-token-file or --metrics-listen)")
	fs.StringVar(&c.MetricsListen, "metrics-listen", "",
		"serve /metrics on this address (`host:port`) instead of --listen's, with /healthz and /readyz (which stay on --listen too); "+
			"open unless --metrics-token-file is given, so bind it where only Prometheus reaches")
	fs.StringVar(&c.MetricsTokenFile, "metrics-token-file", "",
		"file of bearer tokens, one a line, that read /metrics (not tenants' tokens); "+
			"with --tokens-file and neither this nor --metrics-listen, /metrics answers 401 to every request")
	fs.IntVar(&c.MetricsMaxPolicies, "metrics-max-policies", metrics.DefaultMaxPolicies,
		"tenant/policy pairs with a policy label of their own in retry_attempts_total, all tenants together; "+
			"later ones are counted under policy=\""+metrics.OtherPolicy+"\" of their tenant")
	fs.IntVar(&c.MetricsMaxPoliciesPerTenant, "metrics-max-policies-per-tenant", metrics.DefaultMaxPoliciesPerTenant,
		"of those pairs, the most one tenant may have")
	fs.IntVar(&c.MetricsMaxDestinations, "metrics-max-destinations", metrics.DefaultMaxDestinations,
		"tenant/destination pairs with a destination label of their own in retry_destination_*, all tenants together; "+
			"later ones are counted under destination=\""+metrics.OtherDestination+"\" of their tenant")
	fs.IntVar(&c.MetricsMaxDestinationsPerTenant, "metrics-max-destinations-per-tenant", metrics.DefaultMaxDestinationsPerTenant,
		"of those pairs, the most one tenant may have")
	fs.BoolVar(&c.AllowPrivate, "allow-private-targets", false, "let tasks call addresses that are not globally reachable (loopback, private, link-local, reserved, documentation; not cloud metadata)")
	fs.Var(prefixes{&c.AllowTargets}, "allow-target", "let tasks call addresses in this `CIDR` (repeatable)")
	fs.BoolVar(&c.Insecure, "insecure", false, "allow a non-loopback listen address without a tokens file")
	fs.StringVar(&c.LogFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&c.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.DurationVar(&c.AttemptTimeout, "attempt-timeout", dispatch.DefaultTimeout, "bound on one attempt: connect, send, read")
	fs.DurationVar(&c.ConnectTimeout, "connect-timeout", dispatch.DefaultConnectTimeout, "bound on connecting to a target")
	fs.DurationVar(&c.ShutdownGrace, "shutdown-grace", scheduler.DefaultShutdownGrace, "on SIGINT/SIGTERM, how long attempts in flight may finish")
	retentionFlags(fs, c)
	hostLimitFlags(fs, &c.HostLimitConfig)
	secretsFlags(fs, &c.SecretsConfig)
	return fs
}

// storeFlags defines the flags that say which store to use, shared by serve
// and migrate.
func storeFlags(fs *flag.FlagSet, c *Config) {
	fs.StringVar(&c.Store, "store", DefaultStore,
		"where tasks are kept: a file `path` or sqlite://path, postgres://user@host/db, or redis://host:port/db")
	fs.StringVar(&c.Schema, "schema", "", "postgres: the (existing) `schema` of retryd's tables (default: the URL's search_path)")
	fs.StringVar(&c.Prefix, "prefix", "", "redis: the `prefix` of retryd's keys (default \"retryd:\")")
	fs.IntVar(&c.Partitions, "partitions", 0, "redis: number of partitions, fixed by the first instance to open the store (default 16)")
	fs.Var(partitionList{&c.ClaimPartitions}, "claim-partitions", "redis: claim only from these `partitions` (like 0-7,12; default all)")
}

// partitionList is a set of partition numbers: "0-3,8" is 0, 1, 2, 3 and 8.
type partitionList struct{ p *[]int }

func (v partitionList) String() string {
	if v.p == nil {
		return ""
	}
	s := make([]string, len(*v.p))
	for i, n := range *v.p {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// maxPartitionNumber bounds the numbers a partition list may hold, so that
// a range cannot ask for a huge list; the store checks the real bound.
const maxPartitionNumber = 1 << 16

// Set adds numbers and ranges separated by commas.
func (v partitionList) Set(s string) error {
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		if !isRange {
			hi = lo
		}
		a, aerr := strconv.Atoi(strings.TrimSpace(lo))
		b, berr := strconv.Atoi(strings.TrimSpace(hi))
		if aerr != nil || berr != nil || a < 0 || b < a || b >= maxPartitionNumber {
			return fmt.Errorf("%q is not a partition number or a range like 0-7", part)
		}
		for n := a; n <= b; n++ {
			*v.p = append(*v.p, n)
		}
	}
	return nil
}

// envName is the variable a flag falls back to: --allow-target is
// RETRYD_ALLOW_TARGET.
func envName(flagName string) string {
	return "RETRYD_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parse reads args, then fills each flag not given on the command line from
// its RETRYD_* variable, if set. The command line wins.
func parse(fs *flag.FlagSet, args []string, getenv func(string) string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] {
			return
		}
		if v := getenv(envName(f.Name)); v != "" {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", envName(f.Name), v, err))
			}
		}
	})
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments: %q", fs.Args()))
	}
	return errors.Join(errs...)
}

// ParseConfig reads the serve flags from args, with the RETRYD_* variables
// (read through getenv) for those not on the command line. Flag errors and
// usage go to usage as well as into the error.
func ParseConfig(args []string, getenv func(string) string, usage io.Writer) (Config, error) {
	var c Config
	fs := newFlagSet("retryd", &c, usage)
	err := parse(fs, args, getenv)
	return c, err
}

// usageFooter explains the environment fallbacks below the flag list.
const usageFooter = `
Every flag may also be given as an environment variable: --allow-target is
RETRYD_ALLOW_TARGET (comma-separated CIDRs), --listen is RETRYD_LISTEN, and so
on. A flag on the command line wins over its variable.
`
