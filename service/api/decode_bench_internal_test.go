package api

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

// The small task of BenchmarkTaskCreate, decoded by the stream decoder of
// POST /retry-tasks, and as a batch's item is (read whole, then parsed).
const benchTask = `{"targetUrl":"http://127.0.0.1:9/hook","policyId":"p","headers":{"Content-Type":"application/json"},"body":"{\"n\":1}"}`

func BenchmarkDecodeTaskStream(b *testing.B) {
	s := decoderServer(nil, 0)
	rule := s.bodyRefRule(DefaultTenant)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		q, err := s.decodeTask(context.Background(), strings.NewReader(benchTask), 1<<20, now, rule)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.settleBody(context.Background(), q); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeTaskInMemory(b *testing.B) {
	s := decoderServer(nil, 0)
	rule := s.bodyRefRule(DefaultTenant)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		data, _ := io.ReadAll(bytes.NewReader([]byte(benchTask)))
		if _, err := parseTask(data, now, rule); err != nil {
			b.Fatal(err)
		}
	}
}
