// Command retryd is the durable retry service: it takes retry tasks over
// HTTP, keeps them in a store, and calls their targets on schedule until
// they succeed or their policy gives up.
//
//	retryd [serve] [flags]   serve the API, /metrics, /healthz and /readyz
//	retryd migrate [flags]   apply the store's schema migrations and exit
//	retryd bench [flags]     measure what users see through the HTTP API of a
//	                         retryd it starts, then the scheduler loop in process
//
// With no flags it keeps its store in ./retryd.db and listens on
// 127.0.0.1:8080. Every flag has an environment fallback (a flag given on
// the command line wins):
//
//	--listen                RETRYD_LISTEN                 host:port (127.0.0.1:8080)
//	--store                 RETRYD_STORE                  path or sqlite://path (./retryd.db), postgres://…, redis://…
//	--schema                RETRYD_SCHEMA                 postgres: existing schema for the tables
//	--prefix                RETRYD_PREFIX                 redis: key prefix (retryd:)
//	--partitions            RETRYD_PARTITIONS             redis: partitions, fixed by the first instance (16)
//	--claim-partitions      RETRYD_CLAIM_PARTITIONS       redis: partitions this instance claims from, like 0-7,12 (all)
//	--workers               RETRYD_WORKERS                attempts in flight at once (512)
//	--lease                 RETRYD_LEASE                  claim lease (1m); must exceed --attempt-timeout by 1s
//	--tokens-file           RETRYD_TOKENS_FILE            "TOKEN TENANT" lines; none means auth off
//	--metrics-token-file    RETRYD_METRICS_TOKEN_FILE     bearer tokens (one a line) that read /metrics; not tenants'
//	--metrics-listen        RETRYD_METRICS_LISTEN         host:port serving /metrics (and the probes) instead of --listen
//	--metrics-max-policies  RETRYD_METRICS_MAX_POLICIES   tenant/policy pairs labelled in retry_attempts_total (1000)
//	--metrics-max-policies-per-tenant                     of them, per tenant (100); RETRYD_METRICS_MAX_POLICIES_PER_TENANT
//	--allow-private-targets RETRYD_ALLOW_PRIVATE_TARGETS  allow loopback, private, link-local targets
//	--allow-target          RETRYD_ALLOW_TARGET           CIDR allowed as a target (repeatable; comma-separated in the variable)
//	--insecure              RETRYD_INSECURE               allow a non-loopback --listen without a tokens file
//	--log-format            RETRYD_LOG_FORMAT             text or json
//	--log-level             RETRYD_LOG_LEVEL              debug, info, warn or error
//	--attempt-timeout       RETRYD_ATTEMPT_TIMEOUT        bound on one attempt (30s)
//	--connect-timeout       RETRYD_CONNECT_TIMEOUT        bound on connecting (5s)
//	--shutdown-grace        RETRYD_SHUTDOWN_GRACE         time attempts in flight get on SIGINT/SIGTERM (10s)
//	--retention             RETRYD_RETENTION              how long finished tasks are kept before they are purged (7d; 0 for ever)
//	--blobs                 RETRYD_BLOBS                  blob store for large bodies: a directory (beside the SQLite file by default), local[:DIR], s3://bucket/prefix?endpoint=…, or off
//	--blob-threshold        RETRYD_BLOB_THRESHOLD         bodies over this go to the blob store (64KiB)
//	--max-body              RETRYD_MAX_BODY               largest POST /retry-tasks with a blob store (64MiB)
//	--allow-body-refs       RETRYD_ALLOW_BODY_REFS        s3://bucket/prefix/ a caller's bodyRef may name, without a tokens file (none)
//
// Targets on loopback or private addresses are refused unless allowed: to
// try retryd against a server on this machine, start it with
// --allow-target 127.0.0.1/32.
//
// /metrics shows every tenant's policy IDs and counts, so with
// --tokens-file it needs a credential of its own: a token of
// --metrics-token-file, or a listener of its own (--metrics-listen, open
// unless --metrics-token-file is given too). With neither, /metrics answers
// 401 to every request; a tenant's token never opens it. Without
// --tokens-file it is open unless --metrics-token-file is given.
//
// Several instances may share a PostgreSQL or Redis store; docs/SCALING.md
// says how, and what the store must guarantee.
//
// retryd lets its heap grow about 32 MiB past what the last garbage
// collection found live before it collects again (Go's GOGC=100 once the
// live heap is larger than that): it keeps little live, and collecting
// each time a few MiB doubled took a tenth of its CPU. GOGC, when set,
// stands instead; GOMEMLIMIT works as usual.
//
// Every attempt carries a W3C traceparent in its task's trace (the trace
// of the request that created it, or one of the task's own). Spans are
// exported over OTLP only when the standard variables ask for it:
// OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, or
// OTEL_TRACES_EXPORTER=otlp), with OTEL_EXPORTER_OTLP_PROTOCOL http/protobuf
// (the default) or grpc; OTEL_SDK_DISABLED=true turns it off.
package main

import (
	"os"

	"github.com/retrykit/retry/cmd/retryd/internal/run"
)

func main() {
	// Only a serving retryd: retryd bench's own process (its clients and
	// target, and the loop it runs in process) keeps Go's default, as the
	// processes of the peers it is compared with do.
	if run.Command(os.Args[1:]) == "serve" {
		keepGCHeadroom() // for the life of the process
	}
	os.Exit(run.Main(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}
