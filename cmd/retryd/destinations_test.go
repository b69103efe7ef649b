package main_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// arrivals is a target that records when each request came and how many
// were open at once, answering after delay.
type arrivals struct {
	*httptest.Server
	delay time.Duration

	mu         sync.Mutex
	at         []time.Time
	open, most int
}

func newArrivals(t *testing.T, delay time.Duration) *arrivals {
	a := &arrivals{delay: delay}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.at = append(a.at, time.Now())
		a.open++
		a.most = max(a.most, a.open)
		a.mu.Unlock()
		time.Sleep(a.delay)
		a.mu.Lock()
		a.open--
		a.mu.Unlock()
	}))
	t.Cleanup(a.Close)
	return a
}

// rate returns the requests a second between the first and the last.
func (a *arrivals) rate() float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.at) < 2 {
		return 0
	}
	first, last := a.at[0], a.at[0]
	for _, at := range a.at {
		if at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	return float64(len(a.at)-1) / last.Sub(first).Seconds()
}

func (a *arrivals) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.at)
}

// busiestSecond returns the most requests that arrived within one second
// of each other, from the first that came after skip.
func (a *arrivals) busiestSecond(skip time.Duration) int {
	a.mu.Lock()
	at := append([]time.Time(nil), a.at...)
	a.mu.Unlock()
	sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
	most := 0
	for i := range at {
		if at[i].Sub(at[0]) < skip {
			continue
		}
		n := 0
		for j := i; j < len(at) && at[j].Sub(at[i]) < time.Second; j++ {
			n++
		}
		most = max(most, n)
	}
	return most
}

// createForDestination creates n tasks of destination id through the
// daemons in turn, conc at a time, and returns their IDs.
func createForDestination(t *testing.T, ds []*daemon, id, policy string, n int) []string {
	t.Helper()
	c := client()
	defer c.CloseIdleConnections()
	ids := make([]string, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				var got task
				body := fmt.Sprintf(`{"destinationId":%q,"path":"/t/%d","policyId":%q}`, id, i, policy)
				if err := post(c, ds[i%len(ds)].url+"/retry-tasks", body, &got, http.StatusCreated); err != nil {
					errs <- err
					return
				}
				ids[i] = got.TaskID
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return ids
}

// waitAllSucceeded polls the tasks through d until every one SUCCEEDED,
// and fails the test for any charged more than one attempt.
func waitAllSucceeded(t *testing.T, d *daemon, ids []string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for _, id := range ids {
		for {
			var got task
			d.call("GET", "/retry-tasks/"+id, nil, http.StatusOK, &got)
			if got.Status == "SUCCEEDED" {
				if got.AttemptNumber != 1 {
					t.Errorf("task %s charged %d attempts (lastError %q); held attempts cost none", id, got.AttemptNumber, got.LastError)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("task %s is %s after %v (lastError %q)", id, got.Status, limit, got.LastError)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// destinationTasks is how many tasks the fleet's rate test sends: the
// full 5,000 under RETRYKIT_LONG=1 (50 s a store at 100/s), fewer by
// default to keep the package quick.
func destinationTasks() int {
	if os.Getenv("RETRYKIT_LONG") == "1" {
		return 5000
	}
	return 500
}

// TestDestinationLimitsHoldForTheFleet: three instances on one shared
// store hold a destination's rate and in-flight limits together, not each
// on its own, and charge the attempts they hold back nothing.
func TestDestinationLimitsHoldForTheFleet(t *testing.T) {
	t.Parallel()
	for _, bc := range sharedBackends() {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			b := bc.make(t)
			ds := startFleet(t, b, 3)
			paced := newArrivals(t, 0)
			slow := newArrivals(t, 200*time.Millisecond)
			ds[0].call("POST", "/retry-policies", map[string]any{"policyId": "p", "maxAttempts": 3}, http.StatusCreated, nil)
			ds[0].call("POST", "/destinations", map[string]any{"destinationId": "paced", "url": paced.URL,
				"rateLimit": map[string]any{"perSecond": 100}}, http.StatusCreated, nil)
			ds[0].call("POST", "/destinations", map[string]any{"destinationId": "slow", "url": slow.URL, "maxInFlight": 10},
				http.StatusCreated, nil)

			n := destinationTasks()
			began := time.Now()
			ids := append(createForDestination(t, ds, "paced", "p", n), createForDestination(t, ds, "slow", "p", 150)...)
			waitAllSucceeded(t, ds[1], ids, time.Duration(n)*30*time.Millisecond+30*time.Second)
			took := time.Since(began)
			if got := paced.count(); got != n {
				t.Errorf("the paced target saw %d requests, want %d", got, n)
			}
			// The first second may hold the burst on top of the rate.
			if most := paced.busiestSecond(time.Second); most > 110 {
				t.Errorf("%d requests within one second at 100/s for the fleet", most)
			}
			if slow.most > 10 {
				t.Errorf("%d requests open at once at the slow target, maxInFlight 10 for the fleet", slow.most)
			}
			t.Logf("%s: %d tasks at 100/s, created and done in %v; the target saw %.1f/s from first to last; busiest second %d; most open at the slow target %d",
				bc.name, n, took.Round(time.Millisecond), paced.rate(), paced.busiestSecond(time.Second), slow.most)

			// A pause made through one instance holds the whole fleet.
			ds[2].call("POST", "/destinations/paced/pause", nil, http.StatusOK, nil)
			time.Sleep(1500 * time.Millisecond) // every instance reads the destination again within a second
			before := paced.count()
			held := createForDestination(t, ds, "paced", "p", 60)
			time.Sleep(2 * time.Second)
			if got := paced.count(); got != before {
				t.Errorf("a paused destination's target saw %d requests from the fleet", got-before)
			}
			ds[1].call("POST", "/destinations/paced/resume", nil, http.StatusOK, nil)
			waitAllSucceeded(t, ds[0], held, 30*time.Second)
		})
	}
}

// TestPauseSurvivesKill9: a paused destination's tasks are not sent for as
// long as it stays paused, through a kill -9 and a restart; resumed, they
// all succeed, each charged one attempt.
func TestPauseSurvivesKill9(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "retryd.db")
	tg := newArrivals(t, 0)
	// The full run under RETRYKIT_LONG=1: 1,000 tasks, paused 10 s.
	tasks, paused := 300, 2*time.Second
	if os.Getenv("RETRYKIT_LONG") == "1" {
		tasks, paused = 1000, 10*time.Second
	}
	d := startDaemon(t, db, "--allow-target", "127.0.0.1/32")
	d.call("POST", "/destinations", map[string]any{"destinationId": "partner", "url": tg.URL}, http.StatusCreated, nil)
	d.call("POST", "/destinations/partner/pause", map[string]any{"reason": "maintenance"}, http.StatusOK, nil)
	ids := createForDestination(t, []*daemon{d}, "partner", "default", tasks)
	time.Sleep(paused)
	if got := tg.count(); got != 0 {
		t.Fatalf("the target of a paused destination saw %d requests", got)
	}
	d.kill()
	d = startDaemon(t, db, "--allow-target", "127.0.0.1/32")
	time.Sleep(paused)
	if got := tg.count(); got != 0 {
		t.Fatalf("the target of a paused destination saw %d requests", got)
	}
	var dest struct{ Status, StatusReason string }
	d.call("GET", "/destinations/partner", nil, http.StatusOK, &dest)
	if dest.Status != "PAUSED" || dest.StatusReason != "maintenance" {
		t.Errorf("after a restart the destination is %+v", dest)
	}
	d.call("POST", "/destinations/partner/resume", nil, http.StatusOK, nil)
	waitAllSucceeded(t, d, ids, time.Minute)
	if got := tg.count(); got != len(ids) {
		t.Errorf("the target saw %d requests, want %d", got, len(ids))
	}
}

// TestSecretsNeverInFilesOrLogs: the secrets given to destinations and
// tasks appear in no file retryd wrote (database, WAL, blobs), in none of
// its logs at debug level, and in no answer or metric; the target gets
// them.
func TestSecretsNeverInFilesOrLogs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var mu sync.Mutex
	var sent []string
	tg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent = append(sent, r.Header.Get("Authorization")+r.Header.Get("Cookie")+r.Header.Get("X-Api-Key"))
		mu.Unlock()
	}))
	t.Cleanup(tg.Close)
	d := startDaemon(t, filepath.Join(dir, "retryd.db"), "--allow-target", "127.0.0.1/32", "--log-level", "debug")
	secrets := []string{"tok-SECRET-dest-1", "hdr-SECRET-dest-2", "auth-SECRET-task-3", "cookie-SECRET-task-4", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}
	var answers []string
	var out map[string]any
	d.call("POST", "/destinations", map[string]any{"destinationId": "partner", "url": tg.URL,
		"auth": map[string]any{"type": "bearer", "token": secrets[0]}, "headers": map[string]any{"X-Api-Key": secrets[1]},
		"signing": map[string]any{"scheme": "standard-webhooks", "secret": "whsec_" + secrets[4]}}, http.StatusCreated, &out)
	answers = append(answers, fmt.Sprint(out))
	big := make([]byte, 200<<10) // over the blob threshold: its body goes to the blob store
	for i := range big {
		big[i] = 'a' + byte(i%26)
	}
	var ids []string
	for i, body := range []string{"small", string(big)} {
		var tk task
		d.call("POST", "/retry-tasks", map[string]any{"destinationId": "partner", "path": fmt.Sprintf("/t/%d", i), "body": body,
			"headers": map[string]any{"Authorization": "Bearer " + secrets[2], "Cookie": "s=" + secrets[3]}}, http.StatusCreated, &tk)
		ids = append(ids, tk.TaskID)
	}
	waitAllSucceeded(t, d, ids, 30*time.Second)
	for _, path := range []string{"/destinations", "/destinations/partner", "/retry-tasks", "/retry-tasks/" + ids[0],
		"/retry-tasks/" + ids[0] + "/attempts", "/metrics"} {
		resp, err := http.Get(d.url + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		answers = append(answers, string(b))
	}
	d.stop()
	mu.Lock()
	if len(sent) != 2 || !strings.Contains(sent[0], secrets[0]) || !strings.Contains(sent[0], secrets[3]) || !strings.Contains(sent[0], secrets[1]) {
		t.Errorf("the target got %q, want the credentials", sent)
	}
	mu.Unlock()
	files := 0
	err := filepath.Walk(dir, func(path string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		files++
		b, err := os.ReadFile(path)
		for _, s := range secrets {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("%s holds %q", path, s)
			}
		}
		return err
	})
	if err != nil || files < 3 {
		t.Fatalf("walked %d files: %v", files, err)
	}
	for _, text := range append(answers, d.log()) {
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("an answer or the log holds %q", s)
			}
		}
	}
}
