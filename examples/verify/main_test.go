package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sign returns the webhook-signature entry of a message, as retryd makes it.
func sign(secret []byte, id string, ts time.Time, body string) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(id + "." + strconv.FormatInt(ts.Unix(), 10) + "." + body))
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

func TestReceiver(t *testing.T) {
	secret, err := parseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1614265330, 0)
	rc := newReceiver(secret, func() time.Time { return now })
	srv := httptest.NewServer(rc)
	defer srv.Close()

	send := func(id string, ts time.Time, sig, body string) int {
		t.Helper()
		req, err := http.NewRequest("POST", srv.URL, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("webhook-id", id)
		req.Header.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
		req.Header.Set("webhook-signature", sig)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	body := `{"type":"invoice.paid"}`
	other := []byte("another secret of 24 bytes or more")
	for _, c := range []struct {
		name string
		id   string
		ts   time.Time
		sig  string
		body string
		want int
	}{
		{"valid", "msg_1", now, sign(secret, "msg_1", now, body), body, 204},
		{"repeat", "msg_1", now.Add(time.Minute), sign(secret, "msg_1", now.Add(time.Minute), body), body, 200},
		{"rotation: old and new secret", "msg_2", now, sign(other, "msg_2", now, body) + " " + sign(secret, "msg_2", now, body), body, 204},
		{"another secret", "msg_3", now, sign(other, "msg_3", now, body), body, 401},
		{"body changed", "msg_4", now, sign(secret, "msg_4", now, body), body + " ", 401},
		{"id changed", "msg_5", now, sign(secret, "msg_4", now, body), body, 401},
		{"4 min old", "msg_6", now.Add(-4 * time.Minute), sign(secret, "msg_6", now.Add(-4*time.Minute), body), body, 204},
		{"6 min old", "msg_7", now.Add(-6 * time.Minute), sign(secret, "msg_7", now.Add(-6*time.Minute), body), body, 401},
		{"6 min ahead", "msg_8", now.Add(6 * time.Minute), sign(secret, "msg_8", now.Add(6*time.Minute), body), body, 401},
		{"not v1", "msg_9", now, "v2" + sign(secret, "msg_9", now, body)[2:], body, 401},
		{"no signature", "msg_10", now, "", body, 401},
		{"a repeat must still be signed", "msg_1", now, sign(other, "msg_1", now, body), body, 401},
	} {
		if got := send(c.id, c.ts, c.sig, c.body); got != c.want {
			t.Errorf("%s: status %d, want %d", c.name, got, c.want)
		}
	}
}

func TestRememberIsBounded(t *testing.T) {
	rc := newReceiver(nil, time.Now)
	for i := range maxSeen + 10 {
		if !rc.remember(strconv.Itoa(i)) {
			t.Fatalf("id %d taken for a repeat", i)
		}
	}
	if len(rc.seen) != maxSeen {
		t.Fatalf("%d ids remembered, want %d", len(rc.seen), maxSeen)
	}
	if rc.remember(strconv.Itoa(maxSeen + 9)) {
		t.Fatal("a recent id taken for a new one")
	}
	if !rc.remember("0") {
		t.Fatal("the oldest id still remembered")
	}
}
