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
