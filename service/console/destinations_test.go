package console_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry/service/api"
	"github.com/retrykit/retry/service/destination"
	"github.com/retrykit/retry/service/destination/secrets"
	"github.com/retrykit/retry/service/store"
)

// The secrets the test's destinations are given: none may ever be in the
// console's page.
const (
	bearerSecret = "console-secret-token-XYZ"
	headerSecret = "console-header-secret-ABC"
)

// call sends a request to the API as retryctl would (a bearer token, no
// browser headers), wants status and decodes the answer into out.
func call(t *testing.T, srv *httptest.Server, method, path string, body any, status int, out any) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, srv.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, data, status)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, data)
		}
	}
}

type taskJSON struct {
	TaskID string `json:"taskId"`
}

type destinationJSON struct {
	Status       string `json:"status"`
	StatusReason string `json:"statusReason"`
	Signing      struct {
		Secret json.RawMessage `json:"secret"`
	} `json:"signing"`
}

// attempt makes an attempt of task id end as a scheduler would: claimed,
// then finished now with status and lastError.
func attempt(t *testing.T, st store.Store, id string, status store.Status, lastError string) {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	ts, err := st.TaskClaim(ctx, store.ClaimParams{Now: now, Lease: time.Minute, IDs: []string{id}})
	if err != nil || len(ts) != 1 {
		t.Fatalf("TaskClaim(%s) = %v, %v", id, ts, err)
	}
	if status == store.InFlight {
		return
	}
	errs, err := st.TaskFinish(ctx, []store.Finish{{TaskID: id, Version: ts[0].Version, Status: status,
		Attempt:   store.Attempt{AttemptNumber: 1, StartedAt: now, ResponseStatus: 503, ErrorMessage: lastError},
		LastError: lastError, LastStatus: 503, NextAttemptAt: now.Add(time.Hour), Now: now}})
	if err != nil || errs[0] != nil {
		t.Fatalf("TaskFinish(%s) = %v, %v", id, errs, err)
	}
}

// The destinations page lists a tenant's destinations with their live
// figures and no secret, and pauses and resumes them through the API.
func TestConsoleDestinations(t *testing.T) {
	chromiumPath(t)
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	keys, err := secrets.NewKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	srv, st := serverWith(t, func(c *api.Config) {
		c.Keys, c.DestinationBounds = keys, destination.Bounds{MaxTimeout: 30 * time.Second}
	})

	// Two destinations: one calls with a bearer token under a rate limit,
	// the other carries a secret header and signs its requests.
	call(t, srv, "POST", "/destinations", map[string]any{"destinationId": "orders-api", "url": "https://orders.example/hooks",
		"auth": map[string]any{"type": "bearer", "token": bearerSecret}, "rateLimit": map[string]any{"perSecond": 50, "burst": 10},
		"maxInFlight": 8, "timeoutMs": 5000}, http.StatusCreated, nil)
	var billing destinationJSON
	call(t, srv, "POST", "/destinations", map[string]any{"destinationId": "billing", "url": "https://billing.example/in",
		"headers": map[string]any{"X-Api-Key": headerSecret}, "signing": map[string]any{"scheme": "standard-webhooks"}},
		http.StatusCreated, &billing)
	var signingSecret string // answered once, to the create
	if err := json.Unmarshal(billing.Signing.Secret, &signingSecret); err != nil || !strings.HasPrefix(signingSecret, "whsec_") {
		t.Fatalf("billing's signing secret: %s, %v", billing.Signing.Secret, err)
	}

	// orders-api's tasks: one in flight, two pending (one of them retrying
	// after an error) and a dead letter whose error is the newest.
	var ids []string
	for i := range 4 {
		var tk taskJSON
		call(t, srv, "POST", "/retry-tasks", map[string]any{"destinationId": "orders-api", "path": fmt.Sprintf("/v1/orders/%d", i),
			"idempotencyKey": fmt.Sprintf("order-%d", i)}, http.StatusCreated, &tk)
		ids = append(ids, tk.TaskID)
	}
	attempt(t, st, ids[0], store.InFlight, "")
	attempt(t, st, ids[1], store.Pending, "HTTP 503 Service Unavailable")
	time.Sleep(5 * time.Millisecond) // so that the dead letter's error is the newer
	attempt(t, st, ids[2], store.Exhausted, "HTTP 502 Bad Gateway from the orders service")
	// billing has more pending tasks than one page of the console's count,
	// which shows it capped rather than walking them all.
	batch := make([]map[string]any, 101)
	for i := range batch {
		batch[i] = map[string]any{"destinationId": "billing", "path": fmt.Sprintf("/invoice/%d", i), "idempotencyKey": fmt.Sprintf("inv-%d", i)}
	}
	call(t, srv, "POST", "/retry-tasks/batch", map[string]any{"tasks": batch}, http.StatusOK, nil)
	// A task with a targetUrl still shows it.
	var plain taskJSON
	call(t, srv, "POST", "/retry-tasks", map[string]any{"targetUrl": "https://plain.example/hook", "idempotencyKey": "plain"}, http.StatusCreated, &plain)

	b := newBrowser(t)
	b.navigate(srv.URL + "/ui/")
	b.until("the sign-in form", `document.querySelector('#login #token')`)
	b.typeInto(`#token`, token)
	b.click(`#login button[type=submit]`)
	b.until("signed in", `document.querySelector('#counts')`)
	b.click(`header nav a[data-nav=destinations]`)
	b.until("two destinations, their figures read", `document.querySelectorAll('#destinations tr[data-destination]').length === 2 &&
		[...document.querySelectorAll('#destinations .pending')].every(c => c.textContent !== '')`)

	cell := func(id, class string) string {
		t.Helper()
		return strings.Join(strings.Fields(b.text(`#destinations tr[data-destination="`+id+`"] .`+class)), " ")
	}
	for _, c := range []struct{ id, class, want string }{
		{"orders-api", "auth", "bearer"},
		{"orders-api", "rate", "50/s burst 10"},
		{"orders-api", "cap", "8"},
		{"orders-api", "in-flight", "1"},
		{"orders-api", "pending", "2"},
		{"billing", "auth", "none signed, standard-webhooks"},
		{"billing", "rate", "none"},
		{"billing", "cap", "none"},
		{"billing", "in-flight", "0"},
		{"billing", "pending", "100+"},
		{"billing", "last-error", "none"},
	} {
		if got := cell(c.id, c.class); got != c.want {
			t.Errorf("%s's %s shows %q, want %q", c.id, c.class, got, c.want)
		}
	}
	if got := cell("orders-api", "last-error"); !strings.HasPrefix(got, "HTTP 502 Bad Gateway from the orders service EXHAUSTED") {
		t.Errorf("orders-api's last error shows %q, want the dead letter's", got)
	}
	if got := cell("orders-api", "status"); !strings.HasPrefix(got, "ACTIVE since ") {
		t.Errorf("orders-api's status shows %q, want ACTIVE since its creation", got)
	}
	if got := cell("orders-api", "url"); got != "https://orders.example/hooks" {
		t.Errorf("orders-api's URL shows %q", got)
	}
	noSecrets := func(when string) {
		t.Helper()
		html := eval[string](b, `document.documentElement.outerHTML`)
		for _, s := range []string{bearerSecret, headerSecret, signingSecret} {
			if strings.Contains(html, s) {
				t.Fatalf("%s, the page holds the secret %q", when, s)
			}
		}
	}
	noSecrets("listing the destinations")
	b.screenshot("destinations")

	// Pause with a reason (markup, which shows as the text it is): the row
	// and the API say PAUSED.
	const reason = `maintenance <img src=x onerror="window.pwned=1">`
	b.click(`#destinations tr[data-destination="orders-api"] .pause`)
	b.typeInto(`#destinations tr[data-destination="orders-api"] .pause-form .reason`, reason)
	b.screenshot("destinations-pause-reason")
	b.click(`#destinations tr[data-destination="orders-api"] .confirm-pause`)
	b.until("the row shows PAUSED", `document.querySelector('#destinations tr[data-destination="orders-api"]').dataset.status === 'PAUSED'`)
	var d destinationJSON
	call(t, srv, "GET", "/destinations/orders-api", nil, http.StatusOK, &d)
	if d.Status != "PAUSED" || d.StatusReason != reason {
		t.Fatalf("after Pause, the API says %s (%q), want PAUSED (%q)", d.Status, d.StatusReason, reason)
	}
	if got := cell("orders-api", "status"); !strings.HasPrefix(got, "PAUSED "+reason+" since ") {
		t.Errorf("the paused row's status shows %q", got)
	}
	if pwned, imgs := eval[int](b, `window.pwned || 0`), eval[int](b, `document.querySelectorAll('main img').length`); pwned != 0 || imgs != 0 {
		t.Fatalf("the reason ran as markup: window.pwned=%d, %d img elements", pwned, imgs)
	}
	noSecrets("paused")
	b.screenshot("destinations-paused")

	// Resume: ACTIVE again, on the page and in the API.
	b.click(`#destinations tr[data-destination="orders-api"] .resume`)
	b.until("the row shows ACTIVE", `document.querySelector('#destinations tr[data-destination="orders-api"]').dataset.status === 'ACTIVE' &&
		document.querySelector('#destinations tr[data-destination="orders-api"] .pause')`)
	var resumed destinationJSON
	call(t, srv, "GET", "/destinations/orders-api", nil, http.StatusOK, &resumed)
	if resumed.Status != "ACTIVE" || resumed.StatusReason != "" {
		t.Fatalf("after Resume, the API says %s (%q), want ACTIVE", resumed.Status, resumed.StatusReason)
	}

	// The pending count leads to the tasks, which show their destination
	// and path where a task has no targetUrl.
	b.click(`#destinations tr[data-destination="orders-api"] .pending a`)
	b.until("orders-api's pending tasks", `document.querySelectorAll('#tasks tr[data-task]').length === 2`)
	if got := b.text(`#tasks tr[data-task="` + ids[3] + `"] td:nth-child(4)`); got != "POST orders-api/v1/orders/3" {
		t.Errorf("a destination's task's request shows %q, want POST orders-api/v1/orders/3", got)
	}
	b.screenshot("destination-tasks")
	b.navigate(srv.URL + "/ui/#/task/" + ids[1])
	b.until("the task's page", `document.querySelector('#target')`)
	if got := b.text(`#target`); got != "POST orders-api/v1/orders/1" {
		t.Errorf("a destination's task's page shows %q, want POST orders-api/v1/orders/1", got)
	}
	b.screenshot("destination-task")
	b.click(`#target a.destination`)
	b.until("the destination alone", `document.querySelectorAll('#destinations tr[data-destination]').length === 1 &&
		document.querySelector('#destinations tr[data-destination="orders-api"]')`)
	b.navigate(srv.URL + "/ui/#/tasks")
	b.until("every task", `document.querySelector('#tasks tr[data-task="`+plain.TaskID+`"]')`)
	if got := b.text(`#tasks tr[data-task="` + plain.TaskID + `"] td:nth-child(4)`); got != "POST https://plain.example/hook" {
		t.Errorf("a task with a targetUrl shows %q", got)
	}
	noSecrets("on the task pages")
}
