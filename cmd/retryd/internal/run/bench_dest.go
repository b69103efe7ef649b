package run

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/retrykit/retry/service/destination"
	"github.com/retrykit/retry/service/destination/gate"
	"github.com/retrykit/retry/service/destination/secrets"
	"github.com/retrykit/retry/service/destination/signing"
	"github.com/retrykit/retry/service/dispatch"
	"github.com/retrykit/retry/service/store"
)

// The loop runs' --destination: how the tasks name their target.
const (
	destNone   = "none"          // a targetUrl, as tasks without a destination have
	destSigned = "signed-oauth2" // a destination that signs and fetches OAuth2 tokens
)

// benchDestination is the destination of a loop run's tasks, with what it
// needs: a secrets key, the gate and an OAuth2 token endpoint on loopback.
type benchDestination struct {
	keys    *secrets.Keyring
	gate    *gate.Gate
	tokens  *http.Server
	tokenLn net.Listener
	fetches atomic.Int64
	st      store.Store
	made    bool
}

// newBenchDestination makes the gate of mode over st, or returns nil for
// destNone.
func newBenchDestination(st store.Store, disp *dispatch.Dispatcher, mode string) (*benchDestination, error) {
	switch mode {
	case destNone, "":
		return nil, nil
	case destSigned:
	default:
		return nil, fmt.Errorf("--destination %q: want %s or %s", mode, destNone, destSigned)
	}
	key := make([]byte, secrets.KeySize)
	rand.Read(key)
	keys, err := secrets.NewKeyring(key)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &benchDestination{keys: keys, tokenLn: ln, st: st}
	b.tokens = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := b.fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": fmt.Sprintf("bench-token-%d", n), "token_type": "Bearer", "expires_in": 3600})
	})}
	go b.tokens.Serve(ln)
	ds, ok := st.(store.Destinations)
	if !ok {
		b.close()
		return nil, fmt.Errorf("store %T keeps no destinations", st)
	}
	limits := destinationLimits(st)
	b.gate, err = gate.New(gate.Config{Store: ds, Limits: limits, Keys: keys, Dispatcher: disp})
	if err != nil {
		b.close()
		return nil, err
	}
	return b, nil
}

// target returns the TargetURL of a task calling url through the bench's
// destination, which it creates first, with url's origin for its URL.
func (b *benchDestination) target(ctx context.Context, url string) (string, error) {
	rest, _ := strings.CutPrefix(url, "http://")
	host, path, _ := strings.Cut(rest, "/")
	if !b.made {
		secret, err := signing.NewSecret()
		if err != nil {
			return "", err
		}
		d := &destination.Destination{ID: "bench", URL: "http://" + host, Status: destination.Active,
			Auth: &destination.Auth{Type: destination.AuthOAuth2Client, TokenURL: "http://" + b.tokenLn.Addr().String() + "/token",
				ClientID: "bench", ClientSecret: destination.NewSecret("bench-secret")},
			Signing: &destination.Signing{Scheme: destination.SchemeStandardWebhooks, Secret: destination.NewSecret(secret)}}
		if err := d.Seal(b.keys, "bench"); err != nil {
			return "", err
		}
		spec, err := d.Encode()
		if err != nil {
			return "", err
		}
		if _, _, err := b.st.(store.Destinations).DestinationCreate(ctx, &store.Destination{Tenant: "bench", ID: d.ID, Spec: spec,
			RequestHash: "bench", CreatedAt: time.Now()}); err != nil {
			return "", fmt.Errorf("create the destination: %w", err)
		}
		b.made = true
	}
	return destination.Target("bench", "/"+path), nil
}

func (b *benchDestination) close() {
	if b.gate != nil {
		b.gate.Close()
	}
	b.tokens.Close()
}
