package run

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/retrykit/retry/service/dispatch"
	"github.com/retrykit/retry/service/scheduler"
	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/tracing"
)

// maxFlush bounds how long retryd's graceful stop waits for the last spans
// to reach the collector.
const maxFlush = 5 * time.Second

// tracingPlan is what the OTEL_* environment asks of span export.
type tracingPlan struct {
	on       bool
	protocol string // http/protobuf or grpc
	endpoint string // for the log: where spans go
	why      string // for the log when off
}

// planTracing reads the standard OpenTelemetry variables. Export is off
// unless asked for: an exporter named (OTEL_TRACES_EXPORTER=otlp) or an
// OTLP endpoint given (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); the SDK's own default, OTLP to
// localhost, would have every retryd that never heard of a collector
// retry one forever. OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none
// turn it off. Attempts carry their traceparent whatever this says.
func planTracing(getenv func(string) string) (tracingPlan, error) {
	if getenv == nil {
		return tracingPlan{why: "no environment"}, nil
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return tracingPlan{why: "OTEL_SDK_DISABLED=true"}, nil
	}
	tracesEP, commonEP := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); {
	case exp == "" && tracesEP == "" && commonEP == "":
		return tracingPlan{why: "set OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_TRACES_EXPORTER=otlp) to export spans"}, nil
	case exp == "none":
		return tracingPlan{why: "OTEL_TRACES_EXPORTER=none"}, nil
	case exp != "" && exp != "otlp":
		return tracingPlan{}, usageError{fmt.Errorf("OTEL_TRACES_EXPORTER=%q: retryd exports spans with otlp only (or none)", exp)}
	}
	p := tracingPlan{on: true, protocol: strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))}
	if p.protocol == "" {
		p.protocol = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
	}
	switch p.protocol {
	case "", "http/protobuf":
		p.protocol = "http/protobuf"
		switch {
		case tracesEP != "":
			p.endpoint = tracesEP
		case commonEP != "":
			p.endpoint = strings.TrimRight(commonEP, "/") + "/v1/traces"
		default:
			p.endpoint = "http://localhost:4318/v1/traces"
		}
	case "grpc":
		p.endpoint = cmpOr(tracesEP, commonEP, "http://localhost:4317")
	default:
		return tracingPlan{}, usageError{fmt.Errorf("OTLP protocol %q: retryd speaks http/protobuf or grpc", p.protocol)}
	}
	return p, nil
}

func cmpOr(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// startTracing builds the TracerProvider retryd exports spans with, as the
// environment says (planTracing), and logs whether export is on and where.
// It returns a nil provider when export is off, and a stop func that
// flushes the spans still buffered, within timeout, and is to be called
// once everything that makes spans has stopped. The exporter itself reads
// the other OTEL_EXPORTER_OTLP_* variables (headers, timeout, compression,
// certificates), the SDK OTEL_TRACES_SAMPLER and OTEL_BSP_*, and the
// resource OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (service.name is
// retryd unless they say otherwise).
func startTracing(ctx context.Context, getenv func(string) string, log *slog.Logger) (trace.TracerProvider, func(time.Duration), error) {
	plan, err := planTracing(getenv)
	if err != nil {
		return nil, nil, err
	}
	if !plan.on {
		log.Info("tracing export off; attempts carry a W3C traceparent all the same", "why", plan.why)
		return nil, func(time.Duration) {}, nil
	}
	tp, err := newTracerProvider(ctx, plan, getenv)
	if err != nil {
		return nil, nil, err
	}
	// The endpoint without userinfo or query, which may hold credentials.
	where, _, _ := dispatch.SafeURL(plan.endpoint)
	log.Info("tracing export on", "exporter", "otlp", "protocol", plan.protocol, "endpoint", cmpOr(where, plan.endpoint))
	stop := func(timeout time.Duration) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			log.Warn("tracing: spans not flushed at shutdown", "error", err)
		}
	}
	return tp, stop, nil
}

// newTracerProvider is the SDK's provider for plan, with span IDs from
// package tracing (an attempt's span has the ID its target saw).
func newTracerProvider(ctx context.Context, plan tracingPlan, getenv func(string) string) (*sdktrace.TracerProvider, error) {
	var (
		exp sdktrace.SpanExporter
		err error
	)
	// The endpoint is the one planTracing read through getenv (the bench
	// sets its sink's there); one without a scheme is left to the
	// exporter's own reading of the environment.
	explicit := strings.Contains(plan.endpoint, "://")
	if plan.protocol == "grpc" {
		var opts []otlptracegrpc.Option
		if explicit {
			opts = append(opts, otlptracegrpc.WithEndpointURL(plan.endpoint))
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	} else {
		var opts []otlptracehttp.Option
		if explicit {
			opts = append(opts, otlptracehttp.WithEndpointURL(plan.endpoint))
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	// Later detectors win: the environment's service name over retryd.
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "retryd")),
		resource.WithFromEnv(), resource.WithTelemetrySDK(), resource.WithHost())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	// A claim's or a finish's span links to every attempt it carried:
	// up to a claim's or a commit's batch, over the SDK's default of 128,
	// unless OTEL_SPAN_LINK_COUNT_LIMIT says otherwise.
	limits := sdktrace.NewSpanLimits()
	if getenv("OTEL_SPAN_LINK_COUNT_LIMIT") == "" {
		limits.LinkCountLimit = max(limits.LinkCountLimit, store.MaxClaimLimit, scheduler.DefaultCommitBatch)
	}
	return sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(tracing.IDGenerator{}),
		sdktrace.WithRawSpanLimits(limits),
	), nil
}

// traceHandler wraps retryd's HTTP handler with a server span per request
// when tp is set, but for scrapes, probes and the console's static files,
// which would drown the traces that matter.
func traceHandler(h http.Handler, tp trace.TracerProvider) http.Handler {
	if tp == nil {
		return h
	}
	return tracing.Handler(h, tp, func(r *http.Request) bool {
		switch p := r.URL.Path; {
		case p == "/metrics", p == "/healthz", p == "/readyz", p == "/":
			return true
		case strings.HasPrefix(p, "/ui/"):
			return true
		}
		return false
	})
}
