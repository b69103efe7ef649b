package main_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

// startFleet starts n retryd processes on b's store, each with args after
// the e2e flags (later flags win).
func startFleet(t *testing.T, b backend, n int, args ...string) []*daemon {
	t.Helper()
	ds := make([]*daemon, n)
	for i := range ds {
		ds[i] = startDaemon(t, b.store, append(append([]string{"--allow-target", "127.0.0.1/32"}, b.flags...), args...)...)
	}
	return ds
}

// client is an HTTP client that keeps enough idle connections for the
// tests' concurrent requests, so that thousands of them do not each open
// a connection.
func client() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
}

// created is a task the test made: its ID and idempotency key.
type created struct{ id, key string }

// createMany creates n tasks calling url with policy, through the daemons
// in turn, conc requests at a time.
func createMany(t *testing.T, ds []*daemon, url, policy string, n int) []created {
	t.Helper()
	const conc = 32
	var r [6]byte
	_, _ = rand.Read(r[:])
	run := hex.EncodeToString(r[:])
	c := client()
	defer c.CloseIdleConnections()
	out := make([]created, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, conc)
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				body := fmt.Sprintf(`{"targetUrl":%q,"method":"POST","body":"{\"n\":%d}","policyId":%q,"idempotencyKey":"%s-%d"}`,
					url, i, policy, run, i)
				var got task
				// A 503 is tried again, as a client does (the idempotency key
				// makes that safe): for a moment after a store outage, retryd
				// may say ready (its ping passed on a pooled connection) while
				// its Redis client still refuses to dial (go-redis tries again
				// once a second after an outage's failed dials). The try that
				// got the 503 may have created the task all the same (its
				// outcome was unknown to retryd), and then a retry is
				// answered 200 with that task.
				err := post(c, ds[i%len(ds)].url+"/retry-tasks", body, &got, http.StatusCreated)
				for deadline := time.Now().Add(10 * time.Second); errors.Is(err, errUnavailable) && time.Now().Before(deadline); {
					time.Sleep(20 * time.Millisecond)
					err = post(c, ds[i%len(ds)].url+"/retry-tasks", body, &got, http.StatusCreated, http.StatusOK)
				}
				if err != nil {
					errs <- fmt.Errorf("create task %d: %w", i, err)
					return
				}
				out[i] = created{got.TaskID, got.IdempotencyKey}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return out
}

// errUnavailable is post's error for a 503 it did not want: the API's
// "try again", which a client retries.
var errUnavailable = errors.New("service unavailable")

// post sends body as JSON and decodes the answer into out, unless its
// status is none of want.
func post(c *http.Client, url, body string, out any, want ...int) error {
	resp, err := c.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if !slices.Contains(want, resp.StatusCode) {
		if resp.StatusCode == http.StatusServiceUnavailable {
			return fmt.Errorf("%w: POST %s = 503 %s", errUnavailable, url, b)
		}
		return fmt.Errorf("POST %s = %d %s, want one of %v", url, resp.StatusCode, b, want)
	}
	return json.Unmarshal(b, out)
}

// waitSucceeded polls st until want tasks are SUCCEEDED, failing the test
// if any ends otherwise or time runs out. A failed poll is tried again
// (the store may be coming back from a restart).
func waitSucceeded(t *testing.T, st store.Store, want int64, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		counts, err := st.TaskCounts(context.Background())
		if err != nil {
			if time.Now().After(deadline) {
				t.Fatalf("TaskCounts: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if counts[store.Exhausted]+counts[store.Failed]+counts[store.Cancelled] > 0 {
			t.Fatalf("tasks ended otherwise than SUCCEEDED: %v", counts)
		}
		if counts[store.Succeeded] == want {
			return
		}
		if counts[store.Succeeded] > want {
			t.Fatalf("%d tasks SUCCEEDED, more than the %d created", counts[store.Succeeded], want)
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v, want %d SUCCEEDED", limit, counts, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// attemptsMade sums the retry_attempts_total counters d's /metrics shows.
func attemptsMade(t *testing.T, d *daemon) int {
	t.Helper()
	resp, err := http.Get(d.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "retry_attempts_total{") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		total += int(v)
	}
	return total
}

// probe answers d's status for path, or 0 when d does not answer.
func probe(d *daemon, path string) int {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(d.url + path)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitProbe polls path on d until it answers want.
func waitProbe(t *testing.T, d *daemon, path string, want int, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		got := probe(d, path)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s answered %d for %v, want %d", path, got, limit, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// allTasks lists every task of the default tenant in st.
func allTasks(t *testing.T, st store.Store) []*store.Task {
	t.Helper()
	var out []*store.Task
	page := store.Page{Limit: store.MaxPageLimit}
	for {
		items, next, err := st.TaskList(context.Background(), store.TaskFilter{}, page)
		if err != nil {
			t.Fatalf("TaskList: %v", err)
		}
		out = append(out, items...)
		if next == "" {
			return out
		}
		page.Token = next
	}
}
