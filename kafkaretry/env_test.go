package kafkaretry_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/retrykit/retry/kafkaretry"
)

const (
	topic = "orders"
	group = "billing"
)

// env is one in-process kfake cluster speaking the Kafka protocol, with the
// main topic created.
type env struct {
	c    *kfake.Cluster
	opts []kgo.Opt
}

func setup(t *testing.T, partitions int32) *env {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &env{c: c, opts: []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}}
}

func (e *env) client(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append(slices.Clone(e.opts), opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produce writes rs and waits for them; a record with Partition set goes
// to that partition.
func (e *env) produce(t *testing.T, rs ...*kgo.Record) {
	t.Helper()
	cl := e.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("producing: %v", err)
	}
}

// rec is a record of the main topic with key and value id, plus headers.
func rec(id string, partition int32, headers ...kgo.RecordHeader) *kgo.Record {
	return &kgo.Record{Topic: topic, Partition: partition, Key: []byte(id), Value: []byte("value-" + id), Headers: headers}
}

// records returns every record in topic now, in partition and offset order.
func (e *env) records(t *testing.T, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(e.client(t))
	ends, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	want := make(map[int32]int64)
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	var got []*kgo.Record
	if len(want) == 0 {
		return got
	}
	// Committed records only, as the Processor reads them, and the
	// transaction markers too: one may be a partition's last offset.
	cl := e.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("reading %s: %v", topic, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset+1 >= want[r.Partition] {
				delete(want, r.Partition)
			}
			if !r.Attrs.IsControl() {
				got = append(got, r)
			}
		})
	}
	slices.SortFunc(got, func(a, b *kgo.Record) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	return got
}

// committed returns the offsets group has committed on topic.
func (e *env) committed(t *testing.T, group, topic string) map[int32]int64 {
	t.Helper()
	offs, err := kadm.NewClient(e.client(t)).FetchOffsets(t.Context(), group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		// kfake knows no group before its first member joins (a Processor
		// just started may not have yet): it has committed nothing.
		return map[int32]int64{}
	}
	if err != nil {
		t.Fatal(err)
	}
	got := make(map[int32]int64)
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil {
			got[o.Partition] = o.At
		}
	})
	return got
}

// run starts a Processor on the cluster and returns a function that stops
// it and waits for Run to return; the test's cleanup stops it too.
func (e *env) run(t *testing.T, cfg kafkaretry.Config) (stop func()) {
	t.Helper()
	cfg.ClientOpts = append(slices.Clone(e.opts), cfg.ClientOpts...)
	if cfg.Topic == "" {
		cfg.Topic = topic
	}
	if cfg.Group == "" {
		cfg.Group = group
	}
	if cfg.Logger == nil {
		cfg.Logger = slogT(t)
	}
	p, err := kafkaretry.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// call is one Handler call, as the journal saw it.
type call struct {
	id      string
	topic   string
	attempt string // the record's x-retry-attempt, "" on the main topic
	at      time.Time
	rec     *kgo.Record
}

// journal records Handler calls; its handler answers with fn.
type journal struct {
	mu    sync.Mutex
	calls []call
	now   func() time.Time
}

func newJournal() *journal { return &journal{now: time.Now} }

func (j *journal) handler(fn func(c call) error) kafkaretry.Handler {
	return func(_ context.Context, r *kgo.Record) error {
		c := call{id: string(r.Key), topic: r.Topic, attempt: header(r, kafkaretry.HeaderRetryAttempt), at: j.now(), rec: r}
		j.mu.Lock()
		j.calls = append(j.calls, c)
		j.mu.Unlock()
		return fn(c)
	}
}

func (j *journal) all() []call {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.calls)
}

// of returns the calls for record id, in order.
func (j *journal) of(id string) []call {
	var cs []call
	for _, c := range j.all() {
		if c.id == id {
			cs = append(cs, c)
		}
	}
	return cs
}

// header returns the last value of header k of r, or "".
func header(r *kgo.Record, k string) string {
	v := ""
	for _, h := range r.Headers {
		if h.Key == k {
			v = string(h.Value)
		}
	}
	return v
}

// waitFor polls cond until it holds, failing the test after 30s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// metric returns the value of the sample of name whose labels include
// labels (a counter, a gauge, or a histogram's count), or 0.
func metric(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, l := range m.GetLabel() {
					if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return 0
}

// logBuffer is a slog destination that tests can read while the Processor
// writes to it.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

var errFlaky = errors.New("flaky downstream")

// slogT logs to the test's output, shown when it fails or with -v.
func slogT(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), nil))
}
