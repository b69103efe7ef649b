// Command verify receives webhooks that retryd signs as Standard Webhooks
// (https://www.standardwebhooks.com), with the standard library alone.
//
// It answers 204 to a message it accepts, 200 to a repeat of one it has
// accepted (retryd stops retrying either way) and 401 to any other:
//
//	WEBHOOK_SECRET=whsec_... ADDR=127.0.0.1:8080 go run ./verify
package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"log"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	tolerance = 5 * time.Minute // how far a message's timestamp may be from our clock
	maxBody   = 1 << 20
	maxSeen   = 10000 // webhook-ids remembered, to answer a repeat
)

func main() {
	secret, err := parseSecret(os.Getenv("WEBHOOK_SECRET"))
	if err != nil {
		log.Fatalf("WEBHOOK_SECRET: %v", err)
	}
	addr := os.Getenv("ADDR")
	if addr == "" {
		addr = "127.0.0.1:8080"
	}
	log.Printf("listening on %s", addr)
	log.Fatal(http.ListenAndServe(addr, newReceiver(secret, time.Now)))
}

// parseSecret decodes a secret written "whsec_" and its base64.
func parseSecret(s string) ([]byte, error) {
	b64, ok := strings.CutPrefix(s, "whsec_")
	if !ok {
		return nil, errors.New(`want "whsec_" and base64`)
	}
	return base64.StdEncoding.DecodeString(b64)
}

// receiver verifies each message, then remembers its webhook-id.
type receiver struct {
	secret []byte
	now    func() time.Time

	mu   sync.Mutex
	seen map[string]bool
	ids  []string // seen's keys in the order they came, to forget the oldest
}

func newReceiver(secret []byte, now func() time.Time) *receiver {
	return &receiver{secret: secret, now: now, seen: make(map[string]bool)}
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		http.Error(w, "body unreadable or too large", http.StatusRequestEntityTooLarge)
		return
	}
	id := r.Header.Get("webhook-id")
	if err := rc.verify(id, r.Header.Get("webhook-timestamp"), r.Header.Get("webhook-signature"), body); err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	if !rc.remember(id) {
		w.WriteHeader(http.StatusOK) // a repeat: handled already
		return
	}
	log.Printf("webhook %s: %s", id, body) // handle the message here
	w.WriteHeader(http.StatusNoContent)
}

// verify checks the timestamp, then looks for a v1 signature among the
// space-separated ones that matches ours.
func (rc *receiver) verify(id, stamp, signatures string, body []byte) error {
	if id == "" || stamp == "" || signatures == "" {
		return errors.New("missing webhook headers")
	}
	sec, err := strconv.ParseInt(stamp, 10, 64)
	if err != nil {
		return errors.New("bad webhook-timestamp")
	}
	// A captured message replayed later is refused by its age.
	if d := rc.now().Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return errors.New("webhook-timestamp too far from now")
	}
	mac := hmac.New(sha256.New, rc.secret)
	mac.Write([]byte(id + "." + stamp + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	// Several signatures while the sender rotates its secret.
	for _, sig := range strings.Fields(signatures) {
		b64, ok := strings.CutPrefix(sig, "v1,")
		if !ok {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(b64)
		if err == nil && hmac.Equal(got, want) { // constant time
			return nil
		}
	}
	return errors.New("no matching signature")
}

// remember records id and reports whether it is new. Past maxSeen it
// forgets the oldest, to bound memory: a sender retries a message with
// the same id and a fresh timestamp for as long as it retries, so a real
// receiver keeps the ids it handled where it keeps what handling them did.
func (rc *receiver) remember(id string) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.seen[id] {
		return false
	}
	if len(rc.ids) == maxSeen {
		delete(rc.seen, rc.ids[0])
		rc.ids = rc.ids[1:]
	}
	rc.seen[id] = true
	rc.ids = append(rc.ids, id)
	return true
}
