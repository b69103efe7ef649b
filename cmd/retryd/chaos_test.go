package main_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestChaos is scripts/chaos.sh's: RETRYKIT_CHAOS=N kill -9s of retryd,
// every 0.5–2.5 s, under some 300 new tasks a second, on each store of
// RETRYKIT_CHAOS_STORES (sqlite,postgres,redis by default). Then it waits
// for every acknowledged task to end and reports acknowledged, lost (the
// store does not know it), stuck (not SUCCEEDED), duplicate 200s (a
// target's 200 for a task it had answered 200 already: an outcome the kill
// kept from being recorded), and how long after each kill the tasks caught
// in flight were tried again. It fails on a lost or stuck task, a
// duplicate 200 no kill explains, or a task caught in flight not tried
// again within 30 s (the lease is a minute: waiting for it would fail).
func TestChaos(t *testing.T) {
	trials, _ := strconv.Atoi(os.Getenv("RETRYKIT_CHAOS"))
	if trials <= 0 {
		t.Skip("set RETRYKIT_CHAOS=N to run N kill -9 trials per store (scripts/chaos.sh)")
	}
	stores := strings.Split(cmp.Or(os.Getenv("RETRYKIT_CHAOS_STORES"), "sqlite,postgres,redis"), ",")
	for _, name := range stores {
		t.Run(name, func(t *testing.T) {
			start := storeStarter(t, name, nil, "--allow-target", "127.0.0.1/32", "--lease", "1m", "--attempt-timeout", "30s")
			chaos(t, name, trials, start)
		})
	}
}

// chaosTarget answers every request 200 after 10–100 ms, and records
// each request's start and end per idempotency key.
type chaosTarget struct {
	*httptest.Server
	mu   sync.Mutex
	reqs map[string][]chaosReq
}

// killLag bounds how long after a kill the target's handler may start on
// a request the killed retryd had already sent (a loaded machine schedules
// the handler late).
const killLag = time.Second

type chaosReq struct {
	start, end time.Time
	ok         bool // answered 200 (the connection may have died after)
}

func newChaosTarget(t *testing.T) *chaosTarget {
	c := &chaosTarget{reqs: map[string][]chaosReq{}}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		start := time.Now()
		_, _ = io.Copy(io.Discard, r.Body)
		ok := false
		select {
		case <-time.After(time.Duration(10+rand.IntN(90)) * time.Millisecond):
			w.WriteHeader(http.StatusOK)
			ok = true
		case <-r.Context().Done():
		}
		c.mu.Lock()
		c.reqs[key] = append(c.reqs[key], chaosReq{start, time.Now(), ok})
		c.mu.Unlock()
	}))
	t.Cleanup(c.Close)
	return c
}

func chaos(t *testing.T, name string, trials int, start func() *daemon) {
	target := newChaosTarget(t)
	d := start()
	d.putPolicy("chaos", map[string]any{"backoff": "FIXED", "initialDelayMs": 200, "jitterType": "NONE", "maxAttempts": 30})
	var url atomic.Pointer[string]
	url.Store(&d.url)

	ld := startLoad(target.URL, "chaos", &url)

	var kills []time.Time
	for range trials {
		time.Sleep(500*time.Millisecond + time.Duration(rand.IntN(2000))*time.Millisecond)
		// The kill's time is once the process is gone: a request the
		// target sees is then surely from before it or after it.
		d.kill()
		kills = append(kills, time.Now())
		d = start()
		url.Store(&d.url)
	}
	time.Sleep(time.Second)
	acked := ld.stop()

	keys, lost, stuck := checkAcked(t, d, acked)

	// The target answers every request 200, so a task's second request
	// means its first outcome was lost to a kill: the first kill after
	// the request began. That is a task caught in flight, tried again
	// (its reclaim time: from that kill to the new request), and, when the
	// lost request was answered 200, a duplicate 200. A second request no
	// kill explains is a failure.
	target.mu.Lock()
	defer target.mu.Unlock()
	dups, unexplained, notRetried := 0, 0, 0
	perKill := make([]int, len(kills))
	var reclaims []time.Duration
	for k, rs := range target.reqs {
		slices.SortFunc(rs, func(a, b chaosReq) int { return a.start.Compare(b.start) })
		for i := 1; i < len(rs); i++ {
			// A request cut short (not answered) lost its connection to a
			// kill that may be recorded a little before its handler began:
			// the bytes were sent before retryd died, the handler ran after.
			from := rs[i-1].start
			if !rs[i-1].ok {
				from = from.Add(-killLag)
			}
			at := slices.IndexFunc(kills, func(kt time.Time) bool { return kt.After(from) && !kt.After(rs[i].start) })
			if at < 0 {
				unexplained++
				t.Errorf("task %s was requested again with no kill between (requests %+v, kills %v)", k, rs, kills)
				continue
			}
			reclaims = append(reclaims, rs[i].start.Sub(kills[at]))
			if rs[i-1].ok {
				dups++
				perKill[at]++
			}
		}
		if last := rs[len(rs)-1]; !last.ok {
			notRetried++
			t.Errorf("task %s: its last request was cut short by a kill and never made again", k)
		}
	}
	slices.Sort(reclaims)
	pct := func(p float64) time.Duration {
		if len(reclaims) == 0 {
			return 0
		}
		return reclaims[min(len(reclaims)-1, int(p*float64(len(reclaims))))].Round(time.Millisecond)
	}
	for _, r := range reclaims {
		if r > 30*time.Second {
			t.Errorf("a task caught in flight was tried again %v after the kill: not before its lease ran out", r)
			break
		}
	}
	t.Logf("chaos %s: %d kill -9 trials, %d acknowledged, %d lost, %d stuck, %d duplicate 200s (max %d per kill), "+
		"%d unexplained second requests, %d attempts caught in flight, reclaim p50 %v p99 %v max %v",
		name, len(kills), len(keys), lost, stuck, dups, slices.Max(append(perKill, 0)), unexplained,
		len(reclaims)+notRetried, pct(0.5), pct(0.99), pct(1))
}

// loader creates some 300 tasks a second through the API at url (which
// the test moves to each new retryd); a create without an answer is sent
// again with its key until one comes, as a client would. Half the tasks
// are due up to 2 s later, so that kills find tasks claimed ahead of
// their due time.
type loader struct {
	mu    sync.Mutex
	acked map[string]ack
	halt  atomic.Bool
	wg    sync.WaitGroup
}

// ack is an acknowledged create: the task's ID and when the answer came.
type ack struct {
	id string
	at time.Time
}

func startLoad(target, policy string, url *atomic.Pointer[string]) *loader {
	l := &loader{acked: map[string]ack{}}
	hc := &http.Client{Timeout: 10 * time.Second}
	for w := range 8 {
		l.wg.Go(func() {
			for i := 0; !l.halt.Load(); i++ {
				key := fmt.Sprintf("%s-%d-%d", policy, w, i)
				body := map[string]any{"targetUrl": target, "policyId": policy, "idempotencyKey": key}
				if i%2 == 1 {
					body["notBefore"] = time.Now().Add(time.Duration(rand.IntN(2000)) * time.Millisecond).UnixMilli()
				}
				b, _ := json.Marshal(body)
				for !l.halt.Load() {
					resp, err := hc.Post(*url.Load()+"/retry-tasks", "application/json", bytes.NewReader(b))
					if err == nil {
						var got struct{ TaskID string }
						derr := json.NewDecoder(resp.Body).Decode(&got)
						resp.Body.Close()
						if (resp.StatusCode == http.StatusCreated || resp.StatusCode == http.StatusOK) && derr == nil {
							l.mu.Lock()
							l.acked[key] = ack{got.TaskID, time.Now()}
							l.mu.Unlock()
							break
						}
					}
					time.Sleep(20 * time.Millisecond)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	return l
}

// stop ends the load and returns the acknowledged creates by key.
func (l *loader) stop() map[string]ack {
	l.halt.Store(true)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.acked
}

// checkAcked waits up to two minutes for every acknowledged task to end
// and returns their keys, how many retryd d does not know (lost, each
// reported as an error unless lostOK) and how many did not end SUCCEEDED.
func checkAcked(t *testing.T, d *daemon, acked map[string]ack) (keys []string, lost, stuck int) {
	keys, lostKeys, stuck := checkAckedLost(t, d, acked, false)
	return keys, len(lostKeys), stuck
}

// checkAckedLost is checkAcked returning the keys of the lost tasks.
func checkAckedLost(t *testing.T, d *daemon, acked map[string]ack, lostOK bool) (keys, lost []string, stuck int) {
	keys = make([]string, 0, len(acked))
	for k := range acked {
		keys = append(keys, k)
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	var nStuck atomic.Int64
	var lostMu sync.Mutex
	deadline := time.Now().Add(2 * time.Minute)
	next := atomic.Int64{}
	var cw sync.WaitGroup
	for range 8 {
		cw.Go(func() {
			for i := int(next.Add(1)) - 1; i < len(keys); i = int(next.Add(1)) - 1 {
				id := acked[keys[i]].id
				for {
					var got task
					resp, err := hc.Get(d.url + "/retry-tasks/" + id)
					if err != nil {
						time.Sleep(50 * time.Millisecond)
						continue
					}
					code := resp.StatusCode
					_ = json.NewDecoder(resp.Body).Decode(&got)
					resp.Body.Close()
					if code == http.StatusNotFound {
						lostMu.Lock()
						lost = append(lost, keys[i])
						lostMu.Unlock()
						if !lostOK {
							t.Errorf("acknowledged task %s (%s) lost", id, keys[i])
						}
						break
					}
					if got.Status == "SUCCEEDED" {
						break
					}
					if terminal(got) || time.Now().After(deadline) {
						nStuck.Add(1)
						t.Errorf("acknowledged task %s stuck: %+v", id, got)
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
		})
	}
	cw.Wait()
	return keys, lost, int(nStuck.Load())
}
