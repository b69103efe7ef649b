package run

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// otlpSink is a collector that costs next to nothing: an OTLP/HTTP
// receiver on 127.0.0.1 that answers 200 to every export, so that
// `retryd bench --otlp-sink` measures what tracing costs retryd, not what
// a collector costs the machine. It counts the spans it is sent, walking
// the protobuf without decoding it.
type otlpSink struct {
	srv      *http.Server
	url      string
	mu       sync.Mutex   // exports come one at a time, so one buffer serves
	buf      bytes.Buffer // the body of the export being read
	requests atomic.Int64
	spans    atomic.Int64
	bytes    atomic.Int64
}

func startSink() (*otlpSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("otlp sink: %w", err)
	}
	s := &otlpSink{url: "http://" + ln.Addr().String()}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *otlpSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Reset()
	if _, err := s.buf.ReadFrom(r.Body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	b := s.buf.Bytes()
	s.requests.Add(1)
	s.bytes.Add(int64(len(b)))
	if r.Header.Get("Content-Encoding") == "" {
		s.spans.Add(countSpans(b))
	}
	// An empty ExportTraceServiceResponse: all accepted.
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(http.StatusOK)
}

// countSpans counts the spans of an ExportTraceServiceRequest:
// resource_spans (1) → scope_spans (2) → spans (2).
func countSpans(b []byte) int64 {
	var n int64
	each(b, 1, func(rs []byte) {
		each(rs, 2, func(ss []byte) {
			each(ss, 2, func([]byte) { n++ })
		})
	})
	return n
}

// each calls f with every length-delimited field num of message b.
func each(b []byte, num protowire.Number, f func([]byte)) {
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return
		}
		b = b[l:]
		if n == num && typ == protowire.BytesType {
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return
			}
			f(v)
			b = b[l:]
			continue
		}
		if l = protowire.ConsumeFieldValue(n, typ, b); l < 0 {
			return
		}
		b = b[l:]
	}
}

// env is the environment that makes a retryd export to the sink, flushing
// as the SDK does by default.
func (s *otlpSink) env() []string {
	return []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + s.url, "OTEL_TRACES_EXPORTER=otlp"}
}

func (s *otlpSink) String() string {
	return fmt.Sprintf("otlp sink %s: %d exports, %d spans, %.1f MB", s.url, s.requests.Load(), s.spans.Load(),
		float64(s.bytes.Load())/1e6)
}

func (s *otlpSink) close() { _ = s.srv.Close() }
