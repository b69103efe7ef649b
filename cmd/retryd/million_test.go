package main_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestMillion is scripts/million.sh's: RETRYKIT_MILLION=N (a million in
// the script) PENDING tasks due over the next hour, created through the
// batch endpoint, on each store of RETRYKIT_MILLION_STORES
// (sqlite,postgres,redis by default). It reports retryd's resident memory
// with them (after a restart, once the heap is rebuilt, and how long that
// took), how long a restart takes to serve (/readyz 200), how late
// after the restart a task due 8 s after the stop is sent, and how long
// list pages, filtered pages and the metrics scrape take (medians of 5).
// It fails only if a step fails (the figures are for the script to print,
// not for a loaded machine to break).
func TestMillion(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("RETRYKIT_MILLION"))
	if n <= 0 {
		t.Skip("set RETRYKIT_MILLION=N to create N pending tasks per store (scripts/million.sh)")
	}
	stores := strings.Split(cmp.Or(os.Getenv("RETRYKIT_MILLION_STORES"), "sqlite,postgres,redis"), ",")
	for _, name := range stores {
		t.Run(name, func(t *testing.T) {
			args := []string{"--allow-target", "127.0.0.1/32", "--lease", "1m", "--attempt-timeout", "30s"}
			// RETRYKIT_MILLION_GOMEMLIMIT is retryd's GOMEMLIMIT (Go's soft
			// memory limit), to see what memory it needs with one.
			var env []string
			if v := os.Getenv("RETRYKIT_MILLION_GOMEMLIMIT"); v != "" {
				env = append(env, "GOMEMLIMIT="+v)
			}
			start := storeStarter(t, name, env, args...)
			million(t, name, n, start)
		})
	}
}

func million(t *testing.T, name string, n int, start func() *daemon) {
	target := newChaosTarget(t)
	d := start()
	for p := range 10 {
		d.putPolicy(fmt.Sprintf("p%d", p), quick)
	}
	hc := &http.Client{Timeout: time.Minute}
	began := time.Now()
	// Due from two minutes on, over an hour: none comes due during the run.
	first := time.Now().Add(2 * time.Minute)
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	const batch = 1000
	for range 4 {
		wg.Go(func() {
			var sb bytes.Buffer
			for b := int(next.Add(1)) - 1; b*batch < n; b = int(next.Add(1)) - 1 {
				sb.Reset()
				sb.WriteString(`{"tasks":[`)
				for i := b * batch; i < min(n, (b+1)*batch); i++ {
					if i > b*batch {
						sb.WriteByte(',')
					}
					due := first.Add(time.Duration(i) * time.Hour / time.Duration(n)).UnixMilli()
					fmt.Fprintf(&sb, `{"targetUrl":%q,"idempotencyKey":"m-%d","notBefore":%d,"policyId":"p%d"}`,
						target.URL+"/t/"+strconv.Itoa(i%50), i, due, i%10)
				}
				sb.WriteString(`]}`)
				resp, err := hc.Post(d.url+"/retry-tasks/batch", "application/json", bytes.NewReader(sb.Bytes()))
				if err != nil {
					failed.Add(1)
					t.Errorf("batch %d: %v", b, err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					failed.Add(1)
					t.Errorf("batch %d: status %d", b, resp.StatusCode)
					return
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() > 0 {
		t.FailNow()
	}
	created := time.Since(began)
	rssLoaded := rss(t, d)

	// The next due task: 8 s after the stop.
	stopAt := time.Now()
	probeDue := stopAt.Add(8 * time.Second)
	var probe task
	d.call("POST", "/retry-tasks", map[string]any{"targetUrl": target.URL + "/probe", "notBefore": probeDue.UnixMilli()},
		http.StatusCreated, &probe)
	d.stop()
	restarted := time.Now()
	d = start()
	for {
		if resp, err := hc.Get(d.url + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	serving := time.Since(restarted)
	var sentLate time.Duration
	deadline := time.Now().Add(time.Minute)
	for {
		target.mu.Lock()
		rs := target.reqs[probe.IdempotencyKey]
		target.mu.Unlock()
		if len(rs) > 0 {
			sentLate = rs[0].start.Sub(probeDue)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the task due %v after the stop was not sent", probeDue.Sub(stopAt))
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The heap is rebuilt beside the claim loop, which sent the probe
	// without waiting for it: the memory is read once it is complete.
	rebuilt := heapRebuilt(t, d)
	rssRestarted := rss(t, d)

	median := func(path string) time.Duration {
		var ds []time.Duration
		for range 5 {
			began := time.Now()
			resp, err := hc.Get(d.url + path)
			if err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: %d", path, resp.StatusCode)
			}
			ds = append(ds, time.Since(began))
		}
		slices.Sort(ds)
		return ds[len(ds)/2].Round(100 * time.Microsecond)
	}
	var page struct {
		NextPageToken string `json:"nextPageToken"`
	}
	d.call("GET", "/retry-tasks?limit=100", nil, http.StatusOK, &page)
	t.Logf("million %s: %d tasks created in %v (%.0f/s) through the batch endpoint; RSS %d MB loaded, %d MB after a restart "+
		"(its heap rebuilt in %v); restart to /readyz 200 in %v; a task due 8 s after the stop sent %v after its due time; "+
		"list page %v, next page %v, status filter %v, policy filter %v, host filter %v; /metrics %v",
		name, n, created.Round(time.Second), float64(n)/created.Seconds(), rssLoaded>>20, rssRestarted>>20,
		rebuilt.Round(10*time.Millisecond), serving.Round(time.Millisecond), sentLate.Round(time.Millisecond),
		median("/retry-tasks?limit=100"), median("/retry-tasks?limit=100&pageToken="+page.NextPageToken),
		median("/retry-tasks?limit=100&status=PENDING"), median("/retry-tasks?limit=100&policyId=p3"),
		median("/retry-tasks?limit=100&targetHost="+strings.TrimPrefix(target.URL, "http://")), median("/metrics"))
}

// heapRebuilt waits for d's scheduler to log that it has rebuilt its heap
// from the store and returns how long that took.
func heapRebuilt(t *testing.T, d *daemon) time.Duration {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		for _, line := range strings.Split(d.log(), "\n") {
			var rec struct{ Msg, Took string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "scheduler heap rebuilt" {
				took, err := time.ParseDuration(rec.Took)
				if err != nil {
					t.Fatalf("heap rebuilt in %q: %v", rec.Took, err)
				}
				return took
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("retryd did not log that its heap was rebuilt")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// rss is the resident memory of d's process, in bytes.
func rss(t *testing.T, d *daemon) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}
