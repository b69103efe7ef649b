package tracing

import (
	"net"
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/retrykit/retry/service/internal/statuswriter"
)

// handlerName names the server spans' instrumentation scope.
const handlerName = "github.com/retrykit/retry/service/tracing"

// Handler wraps h with a server span per request, a child of the
// request's W3C trace context when it has one, named by its method and,
// once served, the route that took it ("POST /retry-tasks", as the
// innermost http.ServeMux records it in Request.Pattern). skip, when not
// nil, picks requests left untraced (scrapes, health checks). The handlers
// find the span in the request's context.
//
// It is a few lines rather than otelhttp: retryd needs a span and the
// standard attributes, not otelhttp's metrics and their dependencies.
func Handler(h http.Handler, tp trace.TracerProvider, skip func(*http.Request) bool) http.Handler {
	tracer := tp.Tracer(handlerName)
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if skip != nil && skip(r) {
			h.ServeHTTP(w, r)
			return
		}
		ctx := prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		attrs := []attribute.KeyValue{
			attribute.String("http.request.method", r.Method),
			attribute.String("url.path", r.URL.Path),
			attribute.String("url.scheme", scheme(r)),
			attribute.String("network.protocol.version", strconv.Itoa(r.ProtoMajor)+"."+strconv.Itoa(r.ProtoMinor)),
		}
		if host, port, err := net.SplitHostPort(r.RemoteAddr); err == nil {
			attrs = append(attrs, attribute.String("client.address", host))
			if n, err := strconv.Atoi(port); err == nil {
				attrs = append(attrs, attribute.Int("client.port", n))
			}
		}
		ctx, span := tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
		defer span.End()
		sw := &statuswriter.Writer{ResponseWriter: w}
		r = r.WithContext(ctx)
		h.ServeHTTP(sw, r)
		if !span.IsRecording() {
			return
		}
		if r.Pattern != "" {
			span.SetName(r.Method + " " + routeOf(r.Pattern))
			span.SetAttributes(attribute.String("http.route", routeOf(r.Pattern)))
		}
		status := sw.Status
		if status == 0 {
			status = http.StatusOK
		}
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		if status >= 500 {
			// A server span marks only its own failures (5xx) as errors.
			span.SetAttributes(attribute.String("error.type", strconv.Itoa(status)))
			span.SetStatus(codes.Error, http.StatusText(status))
		}
	})
}

// routeOf returns the path of a ServeMux pattern ("POST /retry-tasks/{taskId}"
// gives "/retry-tasks/{taskId}").
func routeOf(pattern string) string {
	if i := strings.IndexByte(pattern, '/'); i >= 0 {
		return pattern[i:]
	}
	return pattern
}

func scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}
