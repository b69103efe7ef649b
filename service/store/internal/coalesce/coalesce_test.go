package coalesce_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store/internal/coalesce"
)

func TestLoneCallRunsAtOnce(t *testing.T) {
	var sizes []int
	c := coalesce.New(coalesce.Config[int, int]{Run: func(_ context.Context, in []int) ([]int, error) {
		sizes = append(sizes, len(in))
		out := make([]int, len(in))
		for i, v := range in {
			out[i] = v * 2
		}
		return out, nil
	}})
	for i := range 3 {
		got, err := c.Do(context.Background(), i)
		if err != nil || got != 2*i {
			t.Fatalf("Do(%d) = %d, %v; want %d", i, got, err, 2*i)
		}
	}
	if len(sizes) != 3 || sizes[0] != 1 || sizes[2] != 1 {
		t.Fatalf("batches %v, want three of one", sizes)
	}
}

// While a batch runs, the calls that come wait and go together in the
// next, each with its own outcome.
func TestBusyCallsShareABatch(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var sizes []int
	c := coalesce.New(coalesce.Config[int, int]{MaxItems: 50, Run: func(_ context.Context, in []int) ([]int, error) {
		mu.Lock()
		sizes = append(sizes, len(in))
		first := len(sizes) == 1
		mu.Unlock()
		if first {
			<-release
		}
		out := make([]int, len(in))
		for i, v := range in {
			out[i] = v + 1000
		}
		return out, nil
	}})
	var wg sync.WaitGroup
	wg.Go(func() {
		if got, err := c.Do(context.Background(), -1); err != nil || got != 999 {
			t.Errorf("Do(-1) = %d, %v", got, err)
		}
	})
	for len(snapshot(&mu, &sizes)) == 0 {
		time.Sleep(time.Millisecond)
	}
	const n = 120
	for i := range n {
		wg.Go(func() {
			if got, err := c.Do(context.Background(), i); err != nil || got != i+1000 {
				t.Errorf("Do(%d) = %d, %v", i, got, err)
			}
		})
	}
	// Let the callers queue behind the running batch, then release it.
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()
	got := snapshot(&mu, &sizes)
	total := 0
	for _, s := range got[1:] {
		if s > 50 {
			t.Errorf("a batch of %d items, over MaxItems", s)
		}
		total += s
	}
	if total != n || len(got) > 1+3+2 {
		t.Errorf("batches %v: want %d items in few batches after the first", got, n)
	}
}

func snapshot(mu *sync.Mutex, s *[]int) []int {
	mu.Lock()
	defer mu.Unlock()
	return append([]int(nil), (*s)...)
}

func TestErrorsReachEveryItem(t *testing.T) {
	boom := errors.New("boom")
	c := coalesce.New(coalesce.Config[int, int]{Run: func(context.Context, []int) ([]int, error) { return nil, boom }})
	if _, err := c.Do(context.Background(), 1); !errors.Is(err, boom) {
		t.Fatalf("Do = %v, want boom", err)
	}
	short := coalesce.New(coalesce.Config[int, int]{Run: func(context.Context, []int) ([]int, error) { return nil, nil }})
	if _, err := short.Do(context.Background(), 1); err == nil {
		t.Fatal("a batch that answered no outcome: Do = nil error")
	}
}

// A caller that gives up before its batch starts is left out of it.
func TestCancelledBeforeStartIsDropped(t *testing.T) {
	release := make(chan struct{})
	var seen []int
	var mu sync.Mutex
	c := coalesce.New(coalesce.Config[int, int]{Run: func(_ context.Context, in []int) ([]int, error) {
		mu.Lock()
		seen = append(seen, in...)
		mu.Unlock()
		if in[0] == 0 {
			<-release
		}
		return make([]int, len(in)), nil
	}})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = c.Do(context.Background(), 0)
	}()
	for len(snapshot(&mu, &seen)) == 0 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Do(ctx, 7); !errors.Is(err, context.Canceled) {
		t.Fatalf("Do with a cancelled context = %v", err)
	}
	close(release)
	<-done
	if _, err := c.Do(context.Background(), 8); err != nil {
		t.Fatal(err)
	}
	for _, v := range snapshot(&mu, &seen) {
		if v == 7 {
			t.Fatalf("batches ran %v: the cancelled item 7 was sent", seen)
		}
	}
}

// With Linger, a batch started while the store is busy waits for as many
// items as the last batch held: 4 callers that each wait for their answer
// and come back one by one still go in one batch.
func TestLingerGathersTheCallersThereAre(t *testing.T) {
	t.Parallel()
	const took = 300 * time.Millisecond // each batch: the store stays busy that long after it
	var mu sync.Mutex
	var sizes []int
	c := coalesce.New(coalesce.Config[int, int]{Linger: time.Hour, Run: func(_ context.Context, in []int) ([]int, error) {
		mu.Lock()
		sizes = append(sizes, len(in))
		mu.Unlock()
		time.Sleep(took)
		return make([]int, len(in)), nil
	}})
	do := func(n int) {
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				if _, err := c.Do(context.Background(), 1); err != nil {
					t.Errorf("Do = %v", err)
				}
			})
		}
		wg.Wait()
	}
	// A lone call, with 4 queuing behind it: batches of 1 and then 4.
	var wg sync.WaitGroup
	wg.Go(func() { do(1) })
	for len(snapshot(&mu, &sizes)) == 0 {
		time.Sleep(time.Millisecond)
	}
	do(4)
	wg.Wait()
	// The 4 come back one after another, the store just busy: the first
	// waits for the other three.
	for range 4 {
		wg.Go(func() { do(1) })
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
	if got := snapshot(&mu, &sizes); len(got) != 3 || got[2] != 4 {
		t.Errorf("batches %v, want [1 4 4]", got)
	}
	// Idle for longer than a batch takes: a lone call goes at once.
	time.Sleep(2 * took)
	do(1)
	if got := snapshot(&mu, &sizes); len(got) != 4 || got[3] != 1 {
		t.Errorf("batches %v, want [1 4 4 1]", got)
	}
}
