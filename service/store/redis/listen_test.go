package redis_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/redis"
	"github.com/retrykit/retry/service/store/redis/redistest"
)

// What every store.Feed does is checked by storetest; here is what is
// Redis's own: partitions, and subscribing again.

type wakeUp struct {
	id      string
	due     time.Time
	version int64
}

// listen runs s.Listen until t ends, calling onListening (which may be
// nil), and returns the wake-ups it hears and what Listen returned.
func listen(t *testing.T, s *redis.Store, onListening ...func()) (<-chan wakeUp, <-chan error, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	wakes := make(chan wakeUp, 64)
	done, stopped := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(stopped)
		var on func()
		if len(onListening) > 0 {
			on = onListening[0]
		}
		done <- s.Listen(ctx, func(d store.Due) { wakes <- wakeUp{d.ID, d.At, d.Version} }, on)
	}()
	t.Cleanup(func() {
		cancel()
		<-stopped
	})
	return wakes, done, cancel
}

// waitSubscribed waits until channel has n subscribers on the server at
// url.
func waitSubscribed(t *testing.T, url, channel string, n int64) {
	t.Helper()
	c := redistest.Client(t, url)
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := c.PubSubNumSub(context.Background(), channel).Result()
		if err == nil && got[channel] == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has %d subscribers (%v), want %d", channel, got[channel], err, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func expectWake(t *testing.T, wakes <-chan wakeUp, id string, due time.Time) {
	t.Helper()
	select {
	case w := <-wakes:
		if w.id != id || !w.due.Equal(due) {
			t.Errorf("wake-up = %s at %v, want %s at %v", w.id, w.due, id, due)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no wake-up for %s", id)
	}
}

func claimOne(t *testing.T, s *redis.Store, id string, at time.Time) *store.Task {
	t.Helper()
	got, err := s.TaskClaim(context.Background(), store.ClaimParams{Now: at, Lease: time.Minute, IDs: []string{id}})
	if err != nil || len(got) != 1 {
		t.Fatalf("TaskClaim(%s) = %d tasks, %v", id, len(got), err)
	}
	return got[0]
}

// finishAs finishes claimed task c as status, due again at next.
func finishAs(t *testing.T, s *redis.Store, c *store.Task, status store.Status, next time.Time) {
	t.Helper()
	errs, err := s.TaskFinish(context.Background(), []store.Finish{{TaskID: c.ID, Version: c.Version, Status: status,
		NextAttemptAt: next, Now: c.LeaseUntil.Add(-time.Minute),
		Attempt: store.Attempt{AttemptNumber: c.AttemptNumber, StartedAt: t0, ResponseStatus: 503}}})
	if err != nil || errs[0] != nil {
		t.Fatalf("TaskFinish(%s) = %v, %v", c.ID, errs, err)
	}
}

// An instance that claims from some partitions hears of those only.
func TestListenToClaimPartitions(t *testing.T) {
	t.Parallel()
	url := redistest.URL(t)
	prefix := redistest.Prefix(t, url)
	writer := closeAtEnd(t, open(t, url, prefix, redis.WithPartitions(4)))
	listener := closeAtEnd(t, open(t, url, prefix, redis.WithClaimPartitions(2)))
	wakes, _, _ := listen(t, listener)
	waitSubscribed(t, url, redis.WakeChannel(listener, 2), 1)
	createIn(t, writer, "acme", policyIn(writer, "acme", 1), 1, 0)
	mine := createIn(t, writer, "acme", policyIn(writer, "acme", 2), 1, 0)[0]
	expectWake(t, wakes, mine.ID, t0)
}

// A lost subscription is logged and made again, and OnListening says so.
func TestListenSubscribesAgain(t *testing.T) {
	t.Parallel()
	url := redistest.URL(t)
	prefix := redistest.Prefix(t, url)
	name := "retrykit-test-" + store.NewID()
	logs := &lockedBuffer{}
	listener := closeAtEnd(t, open(t, withQuery(url, "client_name="+name), prefix,
		redis.WithLogger(slog.New(slog.NewTextHandler(logs, nil)))))
	writer := closeAtEnd(t, open(t, url, prefix))
	subscribed := make(chan struct{}, 2)
	wakes, _, _ := listen(t, listener, func() { subscribed <- struct{}{} })
	waitFor(t, subscribed, "the first subscription")
	channel := redis.WakeChannel(listener, listener.Partition("acme", "p"))
	waitSubscribed(t, url, channel, 1)

	admin := redistest.Client(t, url)
	defer admin.Close()
	ctx := context.Background()
	list, err := admin.ClientList(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	killed := 0
	for line := range strings.SplitSeq(list, "\n") {
		// Only this test's own subscription: others share the server.
		if strings.Contains(line, " name="+name+" ") && !strings.Contains(line, " sub=0 ") {
			id, _, _ := strings.Cut(strings.TrimPrefix(line, "id="), " ")
			if err := admin.Do(ctx, "CLIENT", "KILL", "ID", id).Err(); err != nil {
				t.Fatal(err)
			}
			killed++
		}
	}
	if killed != 1 {
		t.Fatalf("found %d subscribed connections named %s, want 1", killed, name)
	}
	waitFor(t, subscribed, "the second subscription")
	waitSubscribed(t, url, channel, 1)
	tk := createIn(t, writer, "acme", "p", 1, 0)[0]
	expectWake(t, wakes, tk.ID, t0)
	if !strings.Contains(logs.String(), "lost the wake-up subscription") {
		t.Errorf("log = %q, want the lost subscription", logs.String())
	}
}

func waitFor(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatalf("no sign of %s", what)
	}
}

func withQuery(url, q string) string {
	if strings.Contains(url, "?") {
		return url + "&" + q
	}
	return url + "?" + q
}

// lockedBuffer is a bytes.Buffer safe for concurrent use, for logs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
