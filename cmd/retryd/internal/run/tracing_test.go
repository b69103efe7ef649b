package run

import (
	"errors"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

func TestPlanTracing(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      map[string]string
		on       bool
		protocol string
		endpoint string
		usage    bool
	}{
		{name: "nothing set: off, whatever the SDK's default", env: nil},
		{name: "an endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"},
			on: true, protocol: "http/protobuf", endpoint: "http://c:4318/v1/traces"},
		{name: "a traces endpoint, as is", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/x", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://d"},
			on: true, protocol: "http/protobuf", endpoint: "http://c:4318/x"},
		{name: "otlp named: the default endpoint", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"},
			on: true, protocol: "http/protobuf", endpoint: "http://localhost:4318/v1/traces"},
		{name: "grpc", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			on: true, protocol: "grpc", endpoint: "http://c:4317"},
		{name: "the SDK disabled", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_SDK_DISABLED": "true"}},
		{name: "exporter none", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_TRACES_EXPORTER": "none"}},
		{name: "another exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, usage: true},
		{name: "http/json", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, usage: true},
	} {
		p, err := planTracing(func(k string) string { return tc.env[k] })
		if tc.usage {
			if !errors.As(err, new(usageError)) {
				t.Errorf("%s: err %v, want a usage error", tc.name, err)
			}
			continue
		}
		if err != nil || p.on != tc.on || p.protocol != tc.protocol || p.endpoint != tc.endpoint {
			t.Errorf("%s: plan %+v, %v; want on %v, %s, %s", tc.name, p, err, tc.on, tc.protocol, tc.endpoint)
		}
	}
}

func TestCountSpans(t *testing.T) {
	span := func() *tracepb.Span {
		return &tracepb.Span{TraceId: make([]byte, 16), SpanId: make([]byte, 8), Name: "s"}
	}
	req := &collectortrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{
		{ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{span(), span()}}, {Spans: []*tracepb.Span{span()}}}},
		{ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{span()}}}},
	}}
	b, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if n := countSpans(b); n != 4 {
		t.Fatalf("countSpans = %d, want 4", n)
	}
}
