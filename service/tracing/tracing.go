// Package tracing keeps a retry task in one W3C trace, from the request
// that created it to its last attempt, without storing anything of its own.
//
// The trace context is kept in the task's own headers (Traceparent,
// Tracestate, Baggage): the API copies the creating request's into a task
// that carries none, so no store changes schema. From those headers and the
// task's identity everything else is derived, the same way in every
// process and after every restart:
//
//   - the trace ID: the caller's, or, for a task created without one, one
//     made from the task's UUID (16 bytes, as a trace ID is: TraceIDOf), so
//     that its attempts share a trace that GET /retry-tasks/{id} can name;
//   - each attempt's span ID: a hash of the task ID, the attempt number and
//     the start of the task's budget (which a redrive moves, so that the
//     attempts after one do not reuse the ids of those before). The target
//     receives it as its parent in a fresh traceparent, the attempt log can
//     show it, and the attempt's exported span has it too (IDGenerator).
//
// The package depends on the OpenTelemetry API only: propagation to the
// target works with no SDK at all, and a process that exports spans passes
// its own trace.TracerProvider, built with IDGenerator, to the scheduler
// and to Handler.
package tracing

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/retrykit/retry/service/store"
)

// The trace headers, as a task's headers keep them (the API stores every
// header name in canonical form).
const (
	Traceparent = "Traceparent"
	Tracestate  = "Tracestate"
	Baggage     = "Baggage"
)

// IsHeader reports whether name (in any case) is one of the three trace
// headers: they say where a request came from, not what it asks for, so
// the request hash that tells a repeat from a conflict leaves them out.
func IsHeader(name string) bool {
	return strings.EqualFold(name, Traceparent) || strings.EqualFold(name, Tracestate) || strings.EqualFold(name, Baggage)
}

// Header returns the value of the header name among h, whatever the case
// of its key, and whether it is there.
func Header(h map[string]string, name string) (string, bool) {
	if v, ok := h[name]; ok {
		return v, true
	}
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

// Task is where a task's attempts belong: its trace, the caller's span
// they are children of (invalid when the task was created without a trace
// context: each attempt is then a root of the task's trace), and the
// caller's trace flags (sampled when there was no caller).
type Task struct {
	TraceID trace.TraceID
	Parent  trace.SpanID
	Flags   trace.TraceFlags
}

// Of returns the trace of the task id whose headers are headers: that of a
// valid traceparent among them, else the task's own (TraceIDOf).
func Of(id string, headers map[string]string) Task {
	if v, ok := Header(headers, Traceparent); ok {
		if tid, sid, flags, ok := ParseTraceparent(v); ok {
			return Task{TraceID: tid, Parent: sid, Flags: flags}
		}
	}
	return Task{TraceID: TraceIDOf(id), Flags: trace.FlagsSampled}
}

// HasParent reports whether the task's attempts have the caller's span as
// their parent.
func (t Task) HasParent() bool { return t.Parent.IsValid() }

// Remote is the caller's span context, the parent of the task's attempt
// spans; invalid when there was no caller.
func (t Task) Remote(state trace.TraceState) trace.SpanContext {
	if !t.HasParent() {
		return trace.SpanContext{}
	}
	return trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: t.TraceID, SpanID: t.Parent, TraceFlags: t.Flags, TraceState: state, Remote: true,
	})
}

// TraceIDOf is the trace ID of a task created without a trace context,
// made from its UUID: the first 8 bytes as they are (a version 7 UUID's
// time, so the trace ID still shows which task it is), the last 8 mixed
// (mix64, a bijection: no two tasks share a trace). Samplers read those
// last bytes as random (the Go SDK's TraceIDRatioBased takes bytes 8 to
// 15, W3C's random flag promises the last 7), and a UUID's are not quite:
// its variant bits are fixed, which would make a 10 % sampler keep no task
// at all. An ID that is not a UUID (none is, today) is hashed instead.
func TraceIDOf(id string) trace.TraceID {
	var tid trace.TraceID
	if u, ok := store.ParseID(id); ok {
		tid = u
		binary.BigEndian.PutUint64(tid[8:], mix64(binary.BigEndian.Uint64(tid[8:])))
		if tid.IsValid() {
			return tid
		}
	}
	sum := sha256.Sum256([]byte("retryd trace\x00" + id))
	copy(tid[:], sum[:])
	if !tid.IsValid() {
		tid[15] = 1
	}
	return tid
}

// mix64 is MurmurHash3's 64-bit finalizer: a bijection that spreads every
// input bit over the whole output. It must never change (see TraceIDOf and
// AttemptSpanID).
func mix64(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// AttemptSpanID is the span ID of attempt number attempt of task id, whose
// budget started at budgetStart: the span the target sees as its parent.
// It is reproducible from what the store keeps (budgetStart at millisecond
// precision, as every store keeps it), so that it need not be stored. It
// is a 64-bit FNV-1a of the three, finished with MurmurHash3's mixer so
// that attempts one apart differ in every bit: an ID, not a secret, made
// on every attempt's path whether or not spans are exported, so cheap (a
// cryptographic hash cost a few per cent of the claim → send → finish
// loop's CPU). The function must never change: the IDs of attempts
// already made would change with it.
func AttemptSpanID(id string, attempt int, budgetStart time.Time) trace.SpanID {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for i := 0; i < len(id); i++ {
		h = (h ^ uint64(id[i])) * prime
	}
	for _, v := range [2]uint64{uint64(attempt), uint64(budgetStart.UnixMilli())} {
		for range 8 {
			h = (h ^ v&0xff) * prime
			v >>= 8
		}
	}
	h = mix64(h)
	if h == 0 {
		h = 1 // an all-zero span ID is invalid
	}
	var sid trace.SpanID
	binary.BigEndian.PutUint64(sid[:], h)
	return sid
}

// ParseTraceparent reads a traceparent header value as W3C Trace Context
// (level 1) says a receiver must: version 00 is exactly
// "00-<32 hex>-<16 hex>-<2 hex>", lower case, with neither ID all zeros; a
// later version (never ff) may add fields after a dash, which are ignored.
func ParseTraceparent(v string) (trace.TraceID, trace.SpanID, trace.TraceFlags, bool) {
	var (
		tid trace.TraceID
		sid trace.SpanID
	)
	if len(v) < 55 || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return tid, sid, 0, false
	}
	ver, ok := hexByte(v[0:2])
	switch {
	case !ok || ver == 0xff:
		return tid, sid, 0, false
	case ver == 0 && len(v) != 55:
		return tid, sid, 0, false
	case len(v) > 55 && v[55] != '-':
		return tid, sid, 0, false
	}
	for i := range tid {
		if tid[i], ok = hexByte(v[3+2*i : 5+2*i]); !ok {
			return tid, sid, 0, false
		}
	}
	for i := range sid {
		if sid[i], ok = hexByte(v[36+2*i : 38+2*i]); !ok {
			return tid, sid, 0, false
		}
	}
	flags, ok := hexByte(v[53:55])
	if !ok || !tid.IsValid() || !sid.IsValid() {
		return tid, sid, 0, false
	}
	return tid, sid, trace.TraceFlags(flags), true
}

// hexByte decodes two lower-case hex digits.
func hexByte(s string) (byte, bool) {
	hi, ok1 := hexDigit(s[0])
	lo, ok2 := hexDigit(s[1])
	return hi<<4 | lo, ok1 && ok2
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// FormatTraceparent returns the version 00 traceparent of a span.
func FormatTraceparent(tid trace.TraceID, sid trace.SpanID, flags trace.TraceFlags) string {
	return string(AppendTraceparent(make([]byte, 0, 55), tid, sid, flags))
}

// AppendTraceparent appends the version 00 traceparent of a span to b.
func AppendTraceparent(b []byte, tid trace.TraceID, sid trace.SpanID, flags trace.TraceFlags) []byte {
	b = append(b, "00-"...)
	b = hex.AppendEncode(b, tid[:])
	b = append(b, '-')
	b = hex.AppendEncode(b, sid[:])
	b = append(b, '-')
	return hex.AppendEncode(b, []byte{byte(flags)})
}

// idsKey is the context key of the IDs IDGenerator hands out.
type idsKey struct{}

type ids struct {
	tid trace.TraceID
	sid trace.SpanID
}

// WithIDs returns ctx telling IDGenerator to give the next span started
// with it these IDs: an attempt's span gets the span ID its target saw.
// tid matters only for a root span (a task created without a trace
// context); a child keeps its parent's trace.
func WithIDs(ctx context.Context, tid trace.TraceID, sid trace.SpanID) context.Context {
	// One allocation per attempt instead of context.WithValue's two (the
	// context and the boxed IDs): every attempt's span starts here.
	return &idsCtx{ctx, ids{tid, sid}}
}

// idsCtx is ctx carrying ids under idsKey.
type idsCtx struct {
	context.Context
	ids ids
}

func (c *idsCtx) Value(key any) any {
	if key == (idsKey{}) {
		return &c.ids
	}
	return c.Context.Value(key)
}

// IDGenerator gives a span the IDs WithIDs put in its start context, and
// random ones otherwise. It is an sdktrace.IDGenerator (that interface is
// met by its methods alone, so this package needs no SDK); retryd builds
// its TracerProvider with it.
type IDGenerator struct{}

// NewIDs returns the IDs of a root span.
func (IDGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if v, ok := ctx.Value(idsKey{}).(*ids); ok && v.tid.IsValid() && v.sid.IsValid() {
		return v.tid, v.sid
	}
	var tid trace.TraceID
	for !tid.IsValid() {
		binary.NativeEndian.PutUint64(tid[:8], rand.Uint64())
		binary.NativeEndian.PutUint64(tid[8:], rand.Uint64())
	}
	return tid, randomSpanID()
}

// NewSpanID returns the ID of a span of the trace tid.
func (IDGenerator) NewSpanID(ctx context.Context, tid trace.TraceID) trace.SpanID {
	if v, ok := ctx.Value(idsKey{}).(*ids); ok && v.sid.IsValid() {
		return v.sid
	}
	return randomSpanID()
}

func randomSpanID() trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		binary.NativeEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
}
