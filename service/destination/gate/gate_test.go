package gate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/retrykit/retry/service/api"
	"github.com/retrykit/retry/service/destination"
	"github.com/retrykit/retry/service/store"
)

// testSecret is a Standard Webhooks secret the tests give a destination.
const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// TestSignedCredentialedAttempt: a task of a destination is sent to the
// destination's URL and its path, with the destination's credentials and
// headers over the task's, signed as the Standard Webhooks reference
// library verifies, webhook-id its idempotency key.
func TestSignedCredentialedAttempt(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tg := newTarget(t, nil)
	e.call("POST", "/destinations", `{"destinationId":"orders","url":"`+tg.URL+`/v1",
		"auth":{"type":"bearer","token":"tok-SECRET-bearer"},"headers":{"X-Api-Key":"key-SECRET-header"},
		"signing":{"scheme":"standard-webhooks","secret":"`+testSecret+`"}}`, http.StatusCreated)
	tk := e.create(`{"destinationId":"orders","path":"/orders/7?x=1","body":"{\"a\":1}",
		"headers":{"Authorization":"Bearer task-own","X-Trace":"t1"},"idempotencyKey":"order-7"}`)
	if tk.DestinationID != "orders" || tk.Path == nil || *tk.Path != "/orders/7?x=1" || tk.TargetURL != "" {
		t.Errorf("created task = %+v, want destinationId and path, no targetUrl", tk)
	}
	e.wait(tk.TaskID, "SUCCEEDED")
	got := tg.requests()
	if len(got) != 1 {
		t.Fatalf("target saw %d requests, want 1", len(got))
	}
	r := got[0]
	if r.Path != "/v1/orders/7?x=1" || r.Header.Get("Authorization") != "Bearer tok-SECRET-bearer" ||
		r.Header.Get("X-Api-Key") != "key-SECRET-header" || r.Header.Get("X-Trace") != "t1" {
		t.Errorf("target saw %s with headers %v", r.Path, r.Header)
	}
	if id := r.Header.Get("Webhook-Id"); id != "order-7" || r.Header.Get("Idempotency-Key") != "order-7" {
		t.Errorf("webhook-id %q, idempotency key %q; want both the task's key", id, r.Header.Get("Idempotency-Key"))
	}
	wh, err := standardwebhooks.NewWebhook(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(r.Body, r.Header); err != nil {
		t.Errorf("the reference library refuses the signature: %v (headers %v)", err, r.Header)
	}
	if ts := r.Header.Get("Webhook-Timestamp"); ts == "" {
		t.Error("no webhook-timestamp")
	}
}

// TestChangeReachesPendingTasks: a task reads its destination at each
// attempt, so a new URL and a new token reach a task already failing.
func TestChangeReachesPendingTasks(t *testing.T) {
	t.Parallel()
	e := setup(t)
	old := newTarget(t, func(*http.Request) int { return http.StatusUnauthorized }) // the token expired
	fresh := newTarget(t, func(r *http.Request) int {
		if r.Header.Get("Authorization") != "Bearer new-token" {
			return http.StatusUnauthorized
		}
		return http.StatusOK
	})
	e.call("POST", "/destinations", `{"destinationId":"partner","url":"`+old.URL+`","auth":{"type":"bearer","token":"old-token"}}`, http.StatusCreated)
	// A 401 is not retryable by default: a policy that retries it.
	e.call("POST", "/retry-policies", `{"policyId":"auth","backoff":"FIXED","initialDelayMs":300,"maxAttempts":10,"jitterType":"NONE","retryableStatusCodes":[401]}`, http.StatusCreated)
	tk := e.create(`{"destinationId":"partner","path":"/hook","policyId":"auth"}`)
	deadline := time.Now().Add(5 * time.Second)
	for len(old.requests()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	e.call("PATCH", "/destinations/partner", `{"url":"`+fresh.URL+`","auth":{"token":"new-token"}}`, http.StatusOK)
	done := e.wait(tk.TaskID, "SUCCEEDED")
	if got := fresh.requests(); len(got) != 1 || got[0].Path != "/hook" {
		t.Errorf("the new URL saw %v", got)
	}
	if done.AttemptNumber < 2 {
		t.Errorf("attempts = %d, want the failed ones and the one that succeeded", done.AttemptNumber)
	}
}

// TestPauseHoldsUncharged: a paused destination's tasks are not sent and
// not charged; resumed, they go, each charged one attempt.
func TestPauseHoldsUncharged(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tg := newTarget(t, nil)
	e.call("POST", "/destinations", `{"destinationId":"maint","url":"`+tg.URL+`"}`, http.StatusCreated)
	e.call("POST", "/destinations/maint/pause", `{"reason":"partner maintenance"}`, http.StatusOK)
	var ids []string
	for range 5 {
		ids = append(ids, e.create(`{"destinationId":"maint","policyId":"fast"}`).TaskID)
	}
	time.Sleep(1500 * time.Millisecond)
	if n := len(tg.requests()); n != 0 {
		t.Fatalf("a paused destination's target saw %d requests", n)
	}
	for _, id := range ids {
		tk := e.get(id)
		// A held task comes back now and then to look, IN_FLIGHT a moment.
		for deadline := time.Now().Add(5 * time.Second); tk.Status != "PENDING" && time.Now().Before(deadline); tk = e.get(id) {
			time.Sleep(5 * time.Millisecond)
		}
		if tk.Status != "PENDING" || tk.AttemptNumber != 0 || !strings.HasSuffix(tk.LastError, "held: paused") {
			t.Errorf("held task = %+v, want PENDING, no attempt, lastError held: paused", tk)
		}
	}
	e.call("POST", "/destinations/maint/resume", "", http.StatusOK)
	for _, id := range ids {
		if tk := e.wait(id, "SUCCEEDED"); tk.AttemptNumber != 1 {
			t.Errorf("task %s took %d attempts, want 1: the pause must charge none", id, tk.AttemptNumber)
		}
	}
	if n := len(tg.requests()); n != len(ids) {
		t.Errorf("target saw %d requests, want %d", n, len(ids))
	}
}

// TestDeleteRefusedWhileTasksLive: a destination named by a live task
// cannot be deleted; once the task ends, it can.
func TestDeleteRefusedWhileTasksLive(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tg := newTarget(t, nil)
	e.call("POST", "/destinations", `{"destinationId":"d","url":"`+tg.URL+`"}`, http.StatusCreated)
	e.call("POST", "/destinations/d/pause", "", http.StatusOK)
	tk := e.create(`{"destinationId":"d"}`)
	e.call("DELETE", "/destinations/d", "", http.StatusConflict)
	// Created due, the task is claimed, then held back PENDING: only then
	// can it be cancelled.
	for deadline := time.Now().Add(5 * time.Second); e.get(tk.TaskID).Status != "PENDING" && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	e.call("DELETE", "/retry-tasks/"+tk.TaskID, "", http.StatusOK)
	e.call("DELETE", "/destinations/d", "", http.StatusNoContent)
	e.call("GET", "/destinations/d", "", http.StatusNotFound)
	e.call("POST", "/retry-tasks", `{"destinationId":"d"}`, http.StatusBadRequest)
}

// TestTargetURLUnderDestination: a task may give a targetUrl under its
// destination's url instead of a path; one outside it is refused.
func TestTargetURLUnderDestination(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tg := newTarget(t, nil)
	e.call("POST", "/destinations", `{"destinationId":"d","url":"`+tg.URL+`/api"}`, http.StatusCreated)
	tk := e.create(`{"destinationId":"d","targetUrl":"` + tg.URL + `/api/x"}`)
	if tk.Path == nil || *tk.Path != "/x" {
		t.Errorf("path = %v, want /x", tk.Path)
	}
	for _, body := range []string{
		`{"destinationId":"d","targetUrl":"http://127.0.0.1:1/api/x"}`,
		`{"destinationId":"d","targetUrl":"` + tg.URL + `/other"}`,
		`{"destinationId":"d","path":"@evil.example/"}`,
		`{"destinationId":"d","path":"/x","targetUrl":"` + tg.URL + `/api/x"}`,
		`{"path":"/x","targetUrl":"` + tg.URL + `/api/x"}`,
		`{"destinationId":"nope","path":"/x"}`,
	} {
		e.call("POST", "/retry-tasks", body, http.StatusBadRequest)
	}
	e.wait(tk.TaskID, "SUCCEEDED")
}

// TestSecretsNeverInTheClear: the values of secrets given to destinations
// and tasks appear in no answer and in no file retryd wrote.
func TestSecretsNeverInTheClear(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tg := newTarget(t, nil)
	secretValues := []string{"tok-SECRET-bearer-1", "key-SECRET-hdr-2", "pw-SECRET-basic-3", "task-SECRET-auth-4", "task-SECRET-cookie-5"}
	var answers [][]byte
	answers = append(answers, e.call("POST", "/destinations", `{"destinationId":"a","url":"`+tg.URL+`",
		"auth":{"type":"bearer","token":"`+secretValues[0]+`"},"headers":{"X-Api-Key":"`+secretValues[1]+`"},
		"signing":{"scheme":"standard-webhooks","secret":"`+testSecret+`"}}`, http.StatusCreated))
	answers = append(answers, e.call("POST", "/destinations", `{"destinationId":"b","url":"`+tg.URL+`",
		"auth":{"type":"basic","username":"u","password":"`+secretValues[2]+`"}}`, http.StatusCreated))
	tk := e.create(`{"destinationId":"a","headers":{"Authorization":"Bearer ` + secretValues[3] + `","Cookie":"s=` + secretValues[4] + `"}}`)
	plain := e.create(`{"targetUrl":"` + tg.URL + `/plain","headers":{"authorization":"Bearer ` + secretValues[3] + `"}}`)
	e.wait(tk.TaskID, "SUCCEEDED")
	e.wait(plain.TaskID, "SUCCEEDED")
	if got := tg.requests(); len(got) != 2 {
		t.Fatalf("target saw %d requests", len(got))
	} else {
		// Sent in the clear to the target, which is the point.
		sent := got[0].Header.Get("Cookie") + got[1].Header.Get("Cookie") + got[0].Header.Get("Authorization") + got[1].Header.Get("Authorization")
		if !strings.Contains(sent, secretValues[4]) || !strings.Contains(sent, secretValues[0]) {
			t.Errorf("the target did not get the credentials: %q", sent)
		}
	}
	for _, path := range []string{"/destinations", "/destinations/a", "/destinations/b", "/retry-tasks", "/retry-tasks/" + tk.TaskID,
		"/retry-tasks/" + plain.TaskID, "/retry-tasks/" + tk.TaskID + "/attempts"} {
		answers = append(answers, e.call("GET", path, "", http.StatusOK))
	}
	answers = append(answers, e.call("PATCH", "/destinations/a", `{"maxInFlight":3}`, http.StatusOK))
	for _, a := range answers {
		for _, s := range append(secretValues, testSecret) {
			if bytes.Contains(a, []byte(s)) {
				t.Errorf("an answer holds %q: %s", s, a)
			}
		}
	}
	if !bytes.Contains(answers[len(answers)-1], []byte(`"token":{"set":true}`)) {
		t.Errorf("a patch lost the token: %s", answers[len(answers)-1])
	}
	// Every file of the store: database, WAL, the key file is not here.
	err := filepath.Walk(e.dir, func(path string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, s := range append(secretValues, strings.TrimPrefix(testSecret, "whsec_")) {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("%s holds %q", path, s)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestAutoDisable: a destination whose every attempt has failed for
// afterMs goes DISABLED, saying why; its tasks are then held, not spent;
// resumed, they go again.
func TestAutoDisable(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var healthy atomic.Bool
	tg := newTarget(t, func(*http.Request) int {
		if healthy.Load() {
			return http.StatusOK
		}
		return http.StatusServiceUnavailable
	})
	e.call("POST", "/destinations", `{"destinationId":"flaky","url":"`+tg.URL+`","autoDisable":{"afterMs":1000}}`, http.StatusCreated)
	e.call("POST", "/retry-policies", `{"policyId":"patient","backoff":"FIXED","initialDelayMs":100,"maxAttempts":100,"jitterType":"NONE"}`, http.StatusCreated)
	tk := e.create(`{"destinationId":"flaky","policyId":"patient"}`)
	var dest struct {
		Status, StatusReason string
		FailingSince         int64
	}
	for deadline := time.Now().Add(10 * time.Second); dest.Status != "DISABLED"; {
		if time.Now().After(deadline) {
			t.Fatalf("the destination is %+v after 10 s of failures, want DISABLED", dest)
		}
		time.Sleep(50 * time.Millisecond)
		json.Unmarshal(e.call("GET", "/destinations/flaky", "", http.StatusOK), &dest)
	}
	if !strings.Contains(dest.StatusReason, "every attempt failed") {
		t.Errorf("statusReason = %q", dest.StatusReason)
	}
	sent := len(tg.requests())
	time.Sleep(1200 * time.Millisecond)
	if now := len(tg.requests()); now != sent {
		t.Errorf("a disabled destination's target saw %d more requests", now-sent)
	}
	// The held task comes back now and then to look, IN_FLIGHT a moment.
	held := e.get(tk.TaskID)
	for deadline := time.Now().Add(5 * time.Second); held.Status != "PENDING" && time.Now().Before(deadline); held = e.get(tk.TaskID) {
		time.Sleep(5 * time.Millisecond)
	}
	if held.Status != "PENDING" || !strings.HasSuffix(held.LastError, "(held: disabled)") {
		t.Errorf("task of a disabled destination = %+v, want PENDING and held", held)
	}
	healthy.Store(true)
	e.call("POST", "/destinations/flaky/resume", "", http.StatusOK)
	if done := e.wait(tk.TaskID, "SUCCEEDED"); done.AttemptNumber != held.AttemptNumber+1 {
		t.Errorf("attempts = %d after %d before the hold: the hold must charge none", done.AttemptNumber, held.AttemptNumber)
	}
	dest.StatusReason, dest.FailingSince = "", 0 // omitted when empty
	json.Unmarshal(e.call("GET", "/destinations/flaky", "", http.StatusOK), &dest)
	if dest.Status != "ACTIVE" || dest.FailingSince != 0 || dest.StatusReason != "" {
		t.Errorf("after the resume and a success the destination is %+v", dest)
	}
}

// TestCredentialedTaskRepeats: a task whose Authorization is sealed is
// still told apart by it: the same request again is a repeat, one with
// another password a conflict.
func TestCredentialedTaskRepeats(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tg := newTarget(t, nil)
	body := func(password string) string {
		return `{"targetUrl":"` + tg.URL + `","idempotencyKey":"k1","headers":{"Authorization":"Basic ` + password + `"}}`
	}
	e.call("POST", "/retry-tasks", body("cGFzczE="), http.StatusCreated)
	e.call("POST", "/retry-tasks", body("cGFzczE="), http.StatusOK)
	e.call("POST", "/retry-tasks", body("cGFzczI="), http.StatusConflict)
}

// TestUnusableDestinationHolds: a destination whose secrets do not open
// (sealed under a key this retryd lacks) holds its tasks, sends nothing,
// and takes them up again once given new secrets.
func TestUnusableDestinationHolds(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tg := newTarget(t, nil)
	other := keyringFor(t)
	d, err := destination.ParseRequest([]byte(`{"destinationId":"lost","url":"` + tg.URL + `","auth":{"type":"bearer","token":"old"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Seal(other, api.DefaultTenant); err != nil {
		t.Fatal(err)
	}
	spec, _ := d.Encode()
	if _, _, err := e.st.(store.Destinations).DestinationCreate(context.Background(),
		&store.Destination{Tenant: api.DefaultTenant, ID: "lost", Spec: spec, RequestHash: "x"}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 5 {
		ids = append(ids, e.create(`{"destinationId":"lost","policyId":"fast"}`).TaskID)
	}
	time.Sleep(500 * time.Millisecond)
	if n := len(tg.requests()); n != 0 {
		t.Fatalf("the target saw %d requests", n)
	}
	for _, id := range ids {
		if tk := e.get(id); tk.AttemptNumber != 0 || !strings.Contains(tk.LastError, "held: destination unavailable") {
			t.Errorf("task = %+v, want held, uncharged", tk)
		}
	}
	e.call("PATCH", "/destinations/lost", `{"auth":{"token":"new"}}`, http.StatusOK)
	for _, id := range ids {
		if tk := e.wait(id, "SUCCEEDED"); tk.AttemptNumber != 1 {
			t.Errorf("task %s charged %d attempts", id, tk.AttemptNumber)
		}
	}
}

// TestPathThatLeavesTheURL: a task's path checked against one URL is
// checked again against the URL of each attempt: one that would lead to
// another host fails its task rather than go there.
func TestPathThatLeavesTheURL(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tg := newTarget(t, nil)
	e.call("POST", "/destinations", `{"destinationId":"d","url":"`+tg.URL+`/"}`, http.StatusCreated)
	e.call("POST", "/destinations/d/pause", "", http.StatusOK)
	tk := e.create(`{"destinationId":"d","path":"0/x","policyId":"fast"}`) // fine under a URL that ends in '/'
	e.call("PATCH", "/destinations/d", `{"url":"`+tg.URL+`","status":"ACTIVE"}`, http.StatusOK)
	done := e.wait(tk.TaskID, "FAILED")
	if !strings.Contains(done.LastError, "path") || len(tg.requests()) != 0 {
		t.Errorf("task = %+v, target saw %d requests", done, len(tg.requests()))
	}
}

// TestTargetThatRefusesEveryToken: a target that answers 401 to every
// token charges the attempts after the first refusal: no free loop.
func TestTargetThatRefusesEveryToken(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ts := newTokenServer(t, time.Hour)
	tg := newTarget(t, func(*http.Request) int { return http.StatusUnauthorized })
	e.call("POST", "/destinations", `{"destinationId":"no","url":"`+tg.URL+`",
		"auth":{"type":"oauth2ClientCredentials","tokenUrl":"`+ts.URL+`","clientId":"retryd","clientSecret":"client-SECRET",
		"scopes":["orders:write"],"audience":"partner-api"}}`, http.StatusCreated)
	e.call("POST", "/retry-policies", `{"policyId":"auth3","backoff":"FIXED","initialDelayMs":50,"maxAttempts":3,"jitterType":"NONE","retryableStatusCodes":[401]}`, http.StatusCreated)
	var ids []string
	for range 4 {
		ids = append(ids, e.create(`{"destinationId":"no","policyId":"auth3"}`).TaskID)
	}
	for _, id := range ids {
		if tk := e.wait(id, "EXHAUSTED"); tk.AttemptNumber != 3 {
			t.Errorf("task %s ended after %d attempts", id, tk.AttemptNumber)
		}
	}
	// Three charged attempts a task, and at most one free one each for a
	// token gone stale.
	if n := len(tg.requests()); n > 4*3+4 {
		t.Errorf("the target saw %d requests for 4 tasks of 3 attempts", n)
	}
}
