package retryotel_test

import (
	"context"
	"testing"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
	"github.com/retrykit/retry/retryotel"
)

// BenchmarkDo is retry.Do's success path and a path of two failures (with
// no wait: the cost of the machinery), without an observer, with one that
// does nothing, with the Observer on no-op providers (OpenTelemetry not set
// up), and with it on the SDK: every span sampled and handed to an exporter
// that drops it, every measurement aggregated.
func BenchmarkDo(b *testing.B) {
	paths := []struct {
		name  string
		fails int // failures before the success
	}{{"success", 0}, {"two-failures", 2}}
	observers := []struct {
		name string
		new  func(b *testing.B) (context.Context, retry.Observer)
	}{
		{"none", func(b *testing.B) (context.Context, retry.Observer) { return b.Context(), nil }},
		// An observer that does nothing: what the executor spends on
		// observing (reading the clock, making events), apart from this
		// package.
		{"empty", func(b *testing.B) (context.Context, retry.Observer) {
			return b.Context(), retry.ObserverFunc(func(context.Context, retry.Event) {})
		}},
		{"noop", func(b *testing.B) (context.Context, retry.Observer) {
			return b.Context(), newObserver(b, retryotel.Config{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider()})
		}},
		{"sdk", func(b *testing.B) (context.Context, retry.Observer) {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewNoopExporter()))
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			b.Cleanup(func() {
				_ = tp.Shutdown(context.Background())
				_ = mp.Shutdown(context.Background())
			})
			// The caller's span, sampled: its children are recorded.
			ctx, span := tp.Tracer("caller").Start(b.Context(), "caller")
			b.Cleanup(func() { span.End() })
			return ctx, newObserver(b, retryotel.Config{TracerProvider: tp, MeterProvider: mp})
		}},
	}
	for _, path := range paths {
		for _, o := range observers {
			b.Run(path.name+"/"+o.name, func(b *testing.B) {
				ctx, obs := o.new(b)
				p := retry.Policy{Name: "bench", Observer: obs,
					Backoff: backoff.Policy{Kind: backoff.Fixed, Base: backoff.None, Jitter: backoff.NoJitter}}
				n := 0
				op := func(context.Context) error {
					if n++; n%(path.fails+1) != 0 {
						return errFlaky
					}
					return nil
				}
				b.ReportAllocs()
				for b.Loop() {
					if err := retry.Do(ctx, p, op); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func newObserver(b *testing.B, c retryotel.Config) retry.Observer {
	obs, err := retryotel.NewObserver(c)
	if err != nil {
		b.Fatal(err)
	}
	return obs
}
