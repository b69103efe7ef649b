package run

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/retrykit/retry/service/api"
	"github.com/retrykit/retry/service/console"
	"github.com/retrykit/retry/service/destination"
	"github.com/retrykit/retry/service/dispatch"
	"github.com/retrykit/retry/service/metrics"
	"github.com/retrykit/retry/service/scheduler"
	"github.com/retrykit/retry/service/store"
)

// Serve runs retryd as c says until ctx ends, then shuts down gracefully:
// the listener stops taking requests, attempts in flight get c.ShutdownGrace
// to finish, and the store is closed. ready, when not nil, receives the
// address the API listens on once it does.
//
// On a store several instances share (PostgreSQL, Redis), the scheduler
// follows the store's change feed, so it hears at once of tasks other
// instances create or make due sooner, and resyncs from the store each
// time the feed comes back after a break; its periodic resync remains the
// fallback. It also watches the other instances' leases, so that the tasks
// of an instance that died are claimed again as their leases expire.
func Serve(ctx context.Context, c Config, log *slog.Logger, ready chan<- net.Addr) error {
	tokens, err := checkAccess(c, log)
	if err != nil {
		return err
	}
	metricsTokens, err := metricsAccess(c, tokens, log)
	if err != nil {
		return err
	}
	blobPlan, err := planBlobs(c, storeKindOf(c.Store))
	if err != nil {
		return err
	}
	o, err := openStore(ctx, c, log)
	if err != nil {
		return err
	}
	defer o.Close()
	kind, err := storeKind(c.Store)
	if err != nil {
		return err
	}
	keys, made, err := loadKeys(c, kind, log)
	if err != nil {
		return err
	}
	if err := checkNewKey(ctx, o.Store, made); err != nil {
		return err
	}
	// Spans are flushed last, once everything that makes them has stopped
	// (defers run last first), for at most maxFlush: a collector that is
	// down must not hold up a restart for long.
	tp, stopTracing, err := startTracing(ctx, c.Getenv, log)
	if err != nil {
		return err
	}
	defer stopTracing(min(c.ShutdownGrace, maxFlush))
	st := o.Store
	log.Info("store open", "store", o.where, "shared", o.follow != nil)
	blobs, blobsWhere, err := openBlobs(ctx, blobPlan, tokens, log)
	if err != nil {
		return err
	}
	if blobs != nil {
		defer blobs.Close() // after the sweeps and the API stop (defers run last first)
	}

	// The dispatcher reads a task's body held by reference (BodyRef) from
	// blobs at each attempt, streaming it to the target; without a blob
	// store (nil), such a task's attempts fail with a clear error.
	disp := dispatch.New(dispatch.Config{
		Blobs:          blobs,
		Guard:          dispatch.Guard{AllowPrivate: c.AllowPrivate, Allow: c.AllowTargets},
		ConnectTimeout: c.ConnectTimeout,
		Timeout:        c.AttemptTimeout,
		// A single busy target may have every worker's attempt at once:
		// it keeps as many connections.
		MaxIdlePerHost: c.Workers,
	})
	defer disp.Close()
	m := metrics.New(st, log, metrics.Limits{Policies: c.MetricsMaxPolicies, PoliciesPerTenant: c.MetricsMaxPoliciesPerTenant,
		Destinations: c.MetricsMaxDestinations, DestinationsPerTenant: c.MetricsMaxDestinationsPerTenant})
	hosts, err := c.hostLimits()
	if err != nil {
		return err
	}
	maxTimeout := cmp.Or(c.DestinationMaxTimeout, disp.Timeout())
	gates, err := openGate(st, keys, disp, c.Lease, maxTimeout, m, log)
	if err != nil {
		return err
	}
	defer gates.Close()
	sched, err := scheduler.New(scheduler.Config{
		// The metrics count attempts from the scheduler's events; at
		// Debug, the scheduler logs each of them itself (retry.Log).
		Store: st, Dispatcher: disp, Recorder: m, Observer: m, Logger: log,
		Workers: c.Workers, Lease: c.Lease, CommitWait: noWaitIfZero(c.CommitWait), ShutdownGrace: c.ShutdownGrace, Tracer: tp, HostLimits: hosts,
		Destinations: gates, Keys: keys,
	})
	if err != nil {
		return err
	}
	apiHandler, err := api.New(api.Config{Store: st, Waker: sched, Handoff: sched, Tokens: tokens, Logger: log, History: m,
		Blobs: blobs, BlobThreshold: c.BlobThreshold, MaxLargeBodyBytes: c.MaxBody, AllowBodyRefs: c.AllowBodyRefs,
		Keys: keys, SecretHeaders: c.SecretHeaders, DestinationBounds: destination.Bounds{MaxTimeout: maxTimeout},
		DestinationChanged: gates.Forget})
	if err != nil {
		return err
	}
	if o.follow != nil {
		// The feed stops before the store closes (defers run last first).
		feedCtx, stopFeed := context.WithCancel(ctx)
		defer stopFeed()
		follow(feedCtx, o.follow, sched, log)
		go watchLeases(feedCtx, st, sched, c.Lease, log)
	}
	if inst, ok := st.(store.Instances); ok {
		// Heartbeats, and the leases of dead instances taken back within
		// seconds (instances.go); it leaves after the scheduler stopped.
		stopInstance, err := keepInstance(ctx, inst, sched, c.Lease, log)
		if err != nil {
			return err
		}
		defer stopInstance()
	}
	if fleet, ok := st.(store.Fleet); ok && hosts != nil {
		go shareHostLimits(ctx, fleet, hosts, log) // hostlimit.go
	}
	// The retention and orphan sweeps (sweep.go) stop before the store
	// and the blob store close; without a blob store (nil) only the
	// retention sweep runs.
	defer startSweeps(ctx, st, blobs, c.Retention, log)()
	scrape, metricsAuth := metricsHandler(m, c, tokens, metricsTokens)
	mux := http.NewServeMux()
	if c.MetricsListen == "" {
		mux.Handle("GET /metrics", scrape)
	}
	mux.Handle("GET /healthz", metrics.Healthy())
	mux.Handle("GET /readyz", metrics.Ready(st))
	mux.Handle("/", apiHandler)
	mux.Handle("/ui/", console.Handler(tokens))
	mux.Handle("GET /{$}", http.RedirectHandler("/ui/", http.StatusFound))

	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	// A path the mux would clean and redirect (HTML) is a JSON 404.
	// The console signs in with a cookie, so every request that changes
	// state is checked for another origin (console.Protect).
	srvs := []*http.Server{newServer(traceHandler(api.CanonicalPaths(console.Protect(mux)), tp), log)}
	lns := []net.Listener{ln}
	metricsURL := "http://" + ln.Addr().String() + "/metrics"
	if c.MetricsListen != "" {
		mln, err := net.Listen("tcp", c.MetricsListen)
		if err != nil {
			ln.Close()
			return fmt.Errorf("--metrics-listen: %w", err)
		}
		srvs = append(srvs, newServer(metricsMux(scrape, st), log))
		lns = append(lns, mln)
		metricsURL = "http://" + mln.Addr().String() + "/metrics"
	}
	log.Info("retryd listening", "url", "http://"+ln.Addr().String(), "store", o.where,
		"blobs", blobsWhere, "workers", c.Workers, "allow_private_targets", c.AllowPrivate, "allow_targets", prefixes{&c.AllowTargets}.String(),
		"metrics_url", metricsURL, "metrics_access", metricsAuth)
	if ready != nil {
		ready <- ln.Addr()
	}

	schedDone := make(chan error, 1)
	go func() { schedDone <- sched.Run(ctx) }()
	srvDone := make(chan error, len(srvs))
	for i, srv := range srvs {
		// The answers net/http writes itself (431, 400) are JSON too.
		go func() { srvDone <- srv.Serve(api.Listener(lns[i])) }()
	}
	closeAll := func() {
		for _, srv := range srvs {
			srv.Close()
		}
	}

	select {
	case <-ctx.Done():
		log.Info("retryd shutting down")
	case err := <-srvDone:
		closeAll()
		return fmt.Errorf("serve: %w", err)
	case err := <-schedDone:
		closeAll()
		return err
	}
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.ShutdownGrace)
	defer cancel()
	for _, srv := range srvs {
		if err := srv.Shutdown(shutCtx); err != nil {
			srv.Close()
		}
	}
	if err := <-schedDone; err != nil {
		return err
	}
	log.Info("retryd stopped")
	return nil
}

// newServer is an HTTP server of retryd's for h.
func newServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// checkAccess loads the tokens file, or, without one, makes sure the API is
// not reachable from other machines unless --insecure says so.
func checkAccess(c Config, log *slog.Logger) (*api.Tokens, error) {
	if c.TokensFile != "" {
		t, err := api.LoadTokens(c.TokensFile)
		if err != nil {
			return nil, fmt.Errorf("--tokens-file: %w", err)
		}
		log.Info("authentication on", "tokens_file", c.TokensFile, "tokens", t.Len())
		return t, nil
	}
	if !loopbackOnly(c.Listen) && !c.Insecure {
		return nil, usageError{fmt.Errorf("refusing to listen on %s without --tokens-file: anyone who can reach it could use retryd as a proxy (pass --insecure to do it anyway)", c.Listen)}
	}
	log.Warn("authentication off: no --tokens-file; every request acts for tenant " + api.DefaultTenant)
	return nil, nil
}

// loopbackOnly reports whether listening on addr is reachable only from
// this machine: a loopback IP or "localhost". An empty host listens on
// every interface.
func loopbackOnly(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

var _ api.Waker = (*scheduler.Scheduler)(nil)

// noWaitIfZero is --commit-wait as scheduler.Config.CommitWait, which
// says "no wait" with a negative wait (its zero is the default).
func noWaitIfZero(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
