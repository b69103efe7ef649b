package clienttest_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry/client"
	"github.com/retrykit/retry/service/api"
	"github.com/retrykit/retry/service/destination"
	"github.com/retrykit/retry/service/destination/secrets"
	"github.com/retrykit/retry/service/store/sqlite"
)

// answers keeps the body of every answer the client reads, so that tests
// can look for a secret in the JSON as it travelled, not only in what the
// client made of it.
type answers struct {
	next http.RoundTripper
	mu   sync.Mutex
	all  []answer
}

type answer struct {
	method, path string
	status       int
	body         string
}

func (a *answers) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := a.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	a.mu.Lock()
	a.all = append(a.all, answer{req.Method, req.URL.Path, resp.StatusCode, string(body)})
	a.mu.Unlock()
	return resp, nil
}

// holding returns the answers whose body holds s.
func (a *answers) holding(s string) []answer {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []answer
	for _, an := range a.all {
		if strings.Contains(an.body, s) {
			out = append(out, an)
		}
	}
	return out
}

// last returns the body of the last answer.
func (a *answers) last() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.all[len(a.all)-1].body
}

// setupDestinations is setup for a retryd that keeps destinations: with a
// secrets key, as retryd --secrets-key-file gives it. The client's answers
// are recorded.
func setupDestinations(t *testing.T) (*client.Client, *answers) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "retryd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tokens, err := api.NewTokens(map[string]string{token: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := secrets.NewKeyring(bytes.Repeat([]byte{7}, secrets.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	h, err := api.New(api.Config{Store: st, Tokens: tokens, Keys: keys,
		DestinationBounds: destination.Bounds{MaxTimeout: 30 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	rec := &answers{next: srv.Client().Transport}
	return client.New(srv.URL, token, client.WithHTTPClient(&http.Client{Transport: rec})), rec
}

// wantAPIError fails unless err is an *Error of status naming field.
func wantAPIError(t *testing.T, what string, err error, sentinel error, status int, field string) {
	t.Helper()
	var ae *client.Error
	if !errors.As(err, &ae) || ae.StatusCode != status || ae.Field != field || (sentinel != nil && !errors.Is(err, sentinel)) {
		t.Errorf("%s: error %v, want a %d naming %q", what, err, status, field)
	}
}

func TestDestinationCreate(t *testing.T) {
	t.Parallel()
	c, rec := setupDestinations(t)
	ctx := context.Background()
	const bearer, header = "bearer-token-in-the-clear", "header-value-in-the-clear"
	want := client.Destination{
		ID: "orders", URL: "https://api.example.com/hooks",
		Auth:        &client.DestinationAuth{Type: client.AuthBearer, Token: client.Secret{Value: bearer}},
		Headers:     map[string]client.Secret{"X-Tenant": {Value: header}},
		Signing:     &client.Signing{}, // the service makes the secret
		RateLimit:   &client.RateLimit{PerSecond: 50, Burst: 5},
		MaxInFlight: 10, TimeoutMs: 5000,
		AutoDisable: &client.AutoDisable{AfterMs: time.Hour.Milliseconds()},
	}
	d, created, err := c.CreateDestination(ctx, want)
	if err != nil || !created {
		t.Fatalf("CreateDestination = %v, %v; want created", created, err)
	}
	signing := d.Signing.Secret.Value
	if !strings.HasPrefix(signing, "whsec_") || d.Signing.Scheme != client.SigningStandardWebhooks {
		t.Errorf("created signing = %+v, want a whsec_ secret of scheme %s", d.Signing, client.SigningStandardWebhooks)
	}
	if d.ID != "orders" || d.URL != want.URL || d.Status != client.DestinationActive || d.Version < 1 ||
		d.CreatedAt == 0 || d.UpdatedAt == 0 || d.MaxInFlight != 10 || d.TimeoutMs != 5000 ||
		*d.RateLimit != *want.RateLimit || *d.AutoDisable != *want.AutoDisable {
		t.Errorf("created = %+v", d)
	}
	if tok := d.Auth.Token; d.Auth.Type != client.AuthBearer || tok.Value != "" || !tok.Set {
		t.Errorf("created auth = %+v, want the token set and not shown", d.Auth)
	}
	if h := d.Headers["X-Tenant"]; h.Value != "" || !h.Set {
		t.Errorf("created header = %+v, want set and not shown", h)
	}

	// The same settings again: the same destination, its secret not shown
	// again.
	again, created, err := c.CreateDestination(ctx, want)
	if err != nil || created || again.Version != d.Version || !again.Signing.Secret.Set || again.Signing.Secret.Value != "" {
		t.Errorf("repeat = %+v, %v, %v; want the destination, not created, its signing secret set and not shown", again, created, err)
	}
	// What the service keeps is not sent: a destination read back repeats
	// its create, as long as it gives the secrets again.
	readBack, err := c.GetDestination(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	readBack.Auth.Token, readBack.Headers["X-Tenant"], readBack.Signing.Secret = client.Secret{Value: bearer}, client.Secret{Value: header}, client.Secret{}
	if _, created, err := c.CreateDestination(ctx, *readBack); err != nil || created {
		t.Errorf("create of the destination read back = %v, %v; want a repeat", created, err)
	}
	for name, change := range map[string]func(d *client.Destination){
		"another url": func(d *client.Destination) { d.URL = "https://other.example.com/" },
		"another token": func(d *client.Destination) {
			d.Auth = &client.DestinationAuth{Type: client.AuthBearer, Token: client.Secret{Value: "other"}}
		},
		"paused": func(d *client.Destination) { d.Status = client.DestinationPaused },
	} {
		other := want
		change(&other)
		_, _, err := c.CreateDestination(ctx, other)
		wantAPIError(t, "create with "+name, err, client.ErrConflict, http.StatusConflict, "destinationId")
	}

	got, err := c.GetDestination(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	d.Signing.Secret = client.Secret{Set: true}
	if g, w := mustJSON(t, got), mustJSON(t, d); g != w {
		t.Errorf("GetDestination = %s\nwant %s", g, w)
	}
	if _, err := c.GetDestination(ctx, "missing"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("GetDestination(missing) = %v, want ErrNotFound", err)
	}

	for _, tc := range []struct {
		name  string
		d     client.Destination
		field string
	}{
		{"no url", client.Destination{ID: "x"}, "url"},
		{"bad id", client.Destination{ID: "a b", URL: "https://h/"}, "destinationId"},
		{"url with a query", client.Destination{ID: "x", URL: "https://h/?a=1"}, "url"},
		{"timeout over the bound", client.Destination{ID: "x", URL: "https://h/", TimeoutMs: 60000}, "timeoutMs"},
		{"unknown auth", client.Destination{ID: "x", URL: "https://h/", Auth: &client.DestinationAuth{Type: "magic"}}, "auth.type"},
		{"bad signing secret", client.Destination{ID: "x", URL: "https://h/", Signing: &client.Signing{Secret: client.Secret{Value: "short"}}}, "signing.secret"},
	} {
		_, _, err := c.CreateDestination(ctx, tc.d)
		wantAPIError(t, tc.name, err, client.ErrInvalid, http.StatusBadRequest, tc.field)
	}

	// The secrets given never come back; the signing secret the service
	// made comes back once, in the answer that made it.
	for _, s := range []string{bearer, header} {
		if got := rec.holding(s); len(got) > 0 {
			t.Errorf("%q is in answers: %+v", s, got)
		}
	}
	if got := rec.holding(signing); len(got) != 1 || got[0].status != http.StatusCreated {
		t.Errorf("the signing secret is in %d answers (%+v), want the 201 alone", len(got), got)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Every kind of secret reads {"set": true} in every answer, and the value
// given never appears.
func TestDestinationSecretsMasked(t *testing.T) {
	t.Parallel()
	c, rec := setupDestinations(t)
	ctx := context.Background()
	certPEM, keyPEM := clientCert(t)
	tls := &client.DestinationTLS{ClientCertPEM: certPEM, ClientKeyPEM: client.Secret{Value: keyPEM}}
	const signing = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	clear := map[string]client.Destination{
		"token":        {Auth: &client.DestinationAuth{Type: client.AuthBearer, Token: client.Secret{Value: "clear-token"}}},
		"password":     {Auth: &client.DestinationAuth{Type: client.AuthBasic, Username: "u", Password: client.Secret{Value: "clear-password"}}},
		"value":        {Auth: &client.DestinationAuth{Type: client.AuthHeader, Name: "X-Api-Key", Value: client.Secret{Value: "clear-value"}}},
		"clientSecret": {Auth: &client.DestinationAuth{Type: client.AuthOAuth2ClientCredentials, TokenURL: "https://idp.example.com/token", ClientID: "id", ClientSecret: client.Secret{Value: "clear-client-secret"}, Scopes: []string{"a", "b"}}},
		"header":       {Headers: map[string]client.Secret{"X-Key": {Value: "clear-header"}}},
		"signing":      {Signing: &client.Signing{Scheme: client.SigningStandardWebhooks, Secret: client.Secret{Value: signing}}},
		"tls":          {TLS: tls},
	}
	values := map[string]string{"token": "clear-token", "password": "clear-password", "value": "clear-value",
		"clientSecret": "clear-client-secret", "header": "clear-header", "signing": signing, "tls": "PRIVATE KEY"}
	for name, d := range clear {
		d.ID, d.URL = "d-"+strings.ToLower(name), "https://h.example.com/"
		created, _, err := c.CreateDestination(ctx, d)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var set client.Secret
		switch name {
		case "token":
			set = created.Auth.Token
		case "password":
			set = created.Auth.Password
		case "value":
			set = created.Auth.Value
		case "clientSecret":
			set = created.Auth.ClientSecret
		case "header":
			set = created.Headers["X-Key"]
		case "signing":
			set = created.Signing.Secret
		case "tls":
			set = created.TLS.ClientKeyPEM
		}
		if set != (client.Secret{Set: true}) {
			t.Errorf("%s reads %+v, want set and not shown", name, set)
		}
		if !strings.Contains(rec.last(), `{"set":true}`) {
			t.Errorf("%s: the answer has no {\"set\":true}: %s", name, rec.last())
		}
		if _, err := c.PauseDestination(ctx, d.ID, "checking"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.PatchDestination(ctx, d.ID, map[string]any{"maxInFlight": 3}, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := c.GetDestination(ctx, d.ID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.ListDestinations(ctx, client.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, v := range values {
		if got := rec.holding(v); len(got) > 0 {
			t.Errorf("the %s given is in %d answers, first %s %s: %s", name, len(got), got[0].method, got[0].path, got[0].body)
		}
	}
}

// clientCert returns a self-signed certificate and its key, as PEM.
func clientCert(t *testing.T) (certPEM, keyPEM string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "retryd-client"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}))
}

func TestDestinationPatch(t *testing.T) {
	t.Parallel()
	c, rec := setupDestinations(t)
	ctx := context.Background()
	d, _, err := c.CreateDestination(ctx, client.Destination{ID: "orders", URL: "https://api.example.com/hooks",
		Auth:      &client.DestinationAuth{Type: client.AuthBearer, Token: client.Secret{Value: "tok"}},
		Headers:   map[string]client.Secret{"X-A": {Value: "a"}, "X-B": {Value: "b"}},
		RateLimit: &client.RateLimit{PerSecond: 10}})
	if err != nil {
		t.Fatal(err)
	}

	// Unconditional, as a map: null removes, a string sets.
	p, err := c.PatchDestination(ctx, "orders", map[string]any{"rateLimit": nil, "maxInFlight": 4,
		"headers": map[string]any{"X-A": nil, "X-C": "c"}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.RateLimit != nil || p.MaxInFlight != 4 || len(p.Headers) != 2 || !p.Headers["X-B"].Set || !p.Headers["X-C"].Set ||
		!p.Auth.Token.Set || p.Version <= d.Version || p.UpdatedAt < d.UpdatedAt || p.CreatedAt != d.CreatedAt {
		t.Errorf("patched = %+v (headers %v), want rateLimit gone, maxInFlight 4, headers X-B and X-C, a new version", p, p.Headers)
	}
	if strings.Contains(rec.last(), `"c"`) {
		t.Errorf("the header value given is in the answer: %s", rec.last())
	}

	// Conditional, at the version read: a destination read, edited and
	// sent back keeps the secrets it shows as set.
	read, err := c.GetDestination(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	read.TimeoutMs = 2500
	p2, err := c.PatchDestination(ctx, "orders", read, read.Version)
	if err != nil {
		t.Fatalf("PatchDestination of the destination read back, at its version: %v", err)
	}
	if p2.TimeoutMs != 2500 || p2.Version <= read.Version || !p2.Auth.Token.Set || len(p2.Headers) != 2 {
		t.Errorf("patched at a version = %+v", p2)
	}
	// The same version again is stale now.
	_, err = c.PatchDestination(ctx, "orders", map[string]any{"timeoutMs": 1000}, read.Version)
	wantAPIError(t, "a stale version", err, client.ErrConflict, http.StatusConflict, "version")
	// A raw patch, at the version it is at.
	p3, err := c.PatchDestination(ctx, "orders", json.RawMessage(`{"timeoutMs": 1000, "status": "PAUSED", "statusReason": "by patch"}`), p2.Version)
	if err != nil || p3.TimeoutMs != 1000 || p3.Status != client.DestinationPaused || p3.StatusReason != "by patch" || p3.StatusSince == 0 {
		t.Errorf("raw patch at the current version = %+v, %v", p3, err)
	}
	if _, err := c.PatchDestination(ctx, "orders", []int{1}, 1); !errors.Is(err, client.ErrInvalid) {
		t.Errorf("a version on a patch that is no object = %v, want ErrInvalid", err)
	}

	// Giving signing without a secret makes one, answered once.
	p4, err := c.PatchDestination(ctx, "orders", client.Destination{Signing: &client.Signing{}}, 0)
	if err != nil || !strings.HasPrefix(p4.Signing.Secret.Value, "whsec_") {
		t.Fatalf("patch adding signing = %+v, %v; want a new whsec_ secret", p4, err)
	}
	if got, _ := c.GetDestination(ctx, "orders"); got == nil || got.Signing.Secret != (client.Secret{Set: true}) {
		t.Errorf("after adding signing, GetDestination shows %+v", got)
	}
	if n := len(rec.holding(p4.Signing.Secret.Value)); n != 1 {
		t.Errorf("the signing secret made by a patch is in %d answers, want 1", n)
	}
	// A new secret replaces the stored one, which {"set": true} would keep.
	if _, err := c.PatchDestination(ctx, "orders", map[string]any{"auth": map[string]any{"token": "new-token"}}, 0); err != nil {
		t.Errorf("patch of a new token: %v", err)
	}

	for _, tc := range []struct {
		name  string
		id    string
		patch any
		err   error
		code  int
		field string
	}{
		{"another id", "orders", map[string]any{"destinationId": "other"}, client.ErrInvalid, 400, "destinationId"},
		{"an invalid change", "orders", map[string]any{"url": "ftp://h/"}, client.ErrInvalid, 400, "url"},
		{"keeping a secret never given", "orders", map[string]any{"auth": map[string]any{"type": "basic", "username": "u", "password": map[string]any{"set": true}, "token": nil}}, client.ErrInvalid, 400, "auth.password"},
		{"no such destination", "missing", map[string]any{"maxInFlight": 1}, client.ErrNotFound, 404, ""},
	} {
		_, err := c.PatchDestination(ctx, tc.id, tc.patch, 0)
		wantAPIError(t, tc.name, err, tc.err, tc.code, tc.field)
	}
}

func TestDestinationPauseResume(t *testing.T) {
	t.Parallel()
	c, _ := setupDestinations(t)
	ctx := context.Background()
	d, _, err := c.CreateDestination(ctx, client.Destination{ID: "orders", URL: "https://api.example.com/"})
	if err != nil {
		t.Fatal(err)
	}
	before := client.MillisOf(time.Now().Add(-time.Second))
	paused, err := c.PauseDestination(ctx, "orders", "their maintenance window")
	if err != nil || paused.Status != client.DestinationPaused || paused.StatusReason != "their maintenance window" ||
		paused.StatusSince < before || paused.Version <= d.Version {
		t.Fatalf("PauseDestination = %+v, %v", paused, err)
	}
	// Pausing again, for the same reason, changes nothing.
	again, err := c.PauseDestination(ctx, "orders", "their maintenance window")
	if err != nil || again.Version != paused.Version || again.StatusSince != paused.StatusSince {
		t.Errorf("second pause = %+v, %v; want the destination unchanged", again, err)
	}
	resumed, err := c.ResumeDestination(ctx, "orders", "")
	if err != nil || resumed.Status != client.DestinationActive || resumed.StatusReason != "" || resumed.Version <= paused.Version {
		t.Errorf("ResumeDestination = %+v, %v", resumed, err)
	}
	if got, err := c.GetDestination(ctx, "orders"); err != nil || got.Status != client.DestinationActive {
		t.Errorf("GetDestination after resume = %+v, %v", got, err)
	}
	if _, err := c.PauseDestination(ctx, "missing", ""); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("PauseDestination(missing) = %v, want ErrNotFound", err)
	}
}

func TestRotateSigningSecret(t *testing.T) {
	t.Parallel()
	c, rec := setupDestinations(t)
	ctx := context.Background()
	d, _, err := c.CreateDestination(ctx, client.Destination{ID: "orders", URL: "https://api.example.com/",
		Signing: &client.Signing{Scheme: client.SigningStandardWebhooks}})
	if err != nil {
		t.Fatal(err)
	}
	first := d.Signing.Secret.Value

	start := time.Now()
	r1, err := c.RotateSigningSecret(ctx, "orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	second := r1.Signing.Secret.Value
	if !strings.HasPrefix(second, "whsec_") || second == first || r1.Version <= d.Version {
		t.Errorf("rotated: secret %q (first %q), version %d", second, first, r1.Version)
	}
	// The old secret signs on for the default overlap, not shown.
	if len(r1.Signing.Previous) != 1 || r1.Signing.Previous[0].Secret != (client.Secret{Set: true}) ||
		!near(r1.Signing.Previous[0].Until, start.Add(client.DefaultSigningOverlap)) {
		t.Errorf("after a rotation with the default overlap, previous = %+v", r1.Signing.Previous)
	}

	// No overlap: the secret rotated out stops at once; the earlier one
	// signs on until its time.
	r2, err := c.RotateSigningSecret(ctx, "orders", client.NoOverlap)
	if err != nil || len(r2.Signing.Previous) != 1 || r2.Signing.Previous[0].Until != r1.Signing.Previous[0].Until {
		t.Errorf("rotation without overlap = %+v, %v", r2, err)
	}
	r3, err := c.RotateSigningSecret(ctx, "orders", 90*time.Minute)
	if err != nil || len(r3.Signing.Previous) != 2 || !near(r3.Signing.Previous[1].Until, start.Add(90*time.Minute)) {
		t.Errorf("rotation with a 90m overlap = %+v, %v", r3, err)
	}

	got, err := c.GetDestination(ctx, "orders")
	if err != nil || got.Signing.Secret != (client.Secret{Set: true}) || len(got.Signing.Previous) != 2 {
		t.Errorf("GetDestination after rotations = %+v, %v", got, err)
	}
	// Each secret is answered once: by the call that made it.
	for i, s := range []string{first, second, r2.Signing.Secret.Value, r3.Signing.Secret.Value} {
		if n := len(rec.holding(s)); n != 1 {
			t.Errorf("secret %d is in %d answers, want 1", i, n)
		}
	}

	_, err = c.RotateSigningSecret(ctx, "orders", 31*24*time.Hour)
	wantAPIError(t, "an overlap over 30 days", err, client.ErrInvalid, 400, "overlapMs")
	if _, _, err := c.CreateDestination(ctx, client.Destination{ID: "plain", URL: "https://api.example.com/"}); err != nil {
		t.Fatal(err)
	}
	_, err = c.RotateSigningSecret(ctx, "plain", 0)
	wantAPIError(t, "a destination that does not sign", err, client.ErrInvalid, 400, "signing")
	_, err = c.RotateSigningSecret(ctx, "missing", 0)
	wantAPIError(t, "no such destination", err, client.ErrNotFound, 404, "")
}

// near reports whether m is within a few seconds of want.
func near(m client.Millis, want time.Time) bool {
	d := m.Time().Sub(want)
	return d > -5*time.Second && d < 5*time.Second
}

func TestDestinationTasks(t *testing.T) {
	t.Parallel()
	c, _ := setupDestinations(t)
	ctx := context.Background()
	if _, _, err := c.CreateDestination(ctx, client.Destination{ID: "orders", URL: "https://api.example.com/hooks"}); err != nil {
		t.Fatal(err)
	}
	byPath, created, err := c.CreateTask(ctx, client.TaskRequest{DestinationID: "orders", Path: "/paid?id=7",
		Headers: map[string]string{"Authorization": "Bearer task-secret", "X-Trace": "t1"}, Body: "{}"})
	if err != nil || !created {
		t.Fatalf("CreateTask by path = %v, %v", created, err)
	}
	if byPath.DestinationID != "orders" || byPath.Path != "/paid?id=7" || byPath.TargetURL != "" {
		t.Errorf("task by path = %+v, want destination orders, path /paid?id=7, no targetUrl", byPath)
	}
	if byPath.Headers["Authorization"] != "••••" || byPath.Headers["X-Trace"] != "t1" {
		t.Errorf("task headers = %v, want Authorization masked, X-Trace as given", byPath.Headers)
	}
	byURL, _, err := c.CreateTask(ctx, client.TaskRequest{DestinationID: "orders", TargetURL: "https://api.example.com/hooks/refunded"})
	if err != nil || byURL.DestinationID != "orders" || byURL.Path != "/refunded" || byURL.TargetURL != "" {
		t.Errorf("task by a targetUrl under the destination = %+v, %v", byURL, err)
	}
	if got, err := c.GetTask(ctx, byPath.TaskID); err != nil || got.DestinationID != "orders" || got.Path != "/paid?id=7" {
		t.Errorf("GetTask = %+v, %v", got, err)
	}
	plain, _, err := c.CreateTask(ctx, client.TaskRequest{TargetURL: "https://api.example.com/hooks/x"})
	if err != nil || plain.DestinationID != "" || plain.TargetURL != "https://api.example.com/hooks/x" {
		t.Errorf("a task without destination = %+v, %v", plain, err)
	}
	results, err := c.CreateTasks(ctx, []client.TaskRequest{{DestinationID: "orders", Path: "/batch"}, {DestinationID: "nope", Path: "/"}})
	if err != nil || !results[0].Created() || results[0].Task.Path != "/batch" || results[1].Err() == nil {
		t.Fatalf("CreateTasks = %+v, %v", results, err)
	}
	wantAPIError(t, "a batch's unknown destination", results[1].Err(), client.ErrInvalid, 400, "tasks[1].destinationId")

	for _, tc := range []struct {
		name  string
		req   client.TaskRequest
		field string
	}{
		{"unknown destination", client.TaskRequest{DestinationID: "nope", Path: "/"}, "destinationId"},
		{"targetUrl outside the destination", client.TaskRequest{DestinationID: "orders", TargetURL: "https://evil.example.com/hooks/x"}, "targetUrl"},
		{"path and targetUrl", client.TaskRequest{DestinationID: "orders", Path: "/a", TargetURL: "https://api.example.com/hooks/a"}, "path"},
		{"path without destination", client.TaskRequest{Path: "/a"}, "path"},
		{"a path that leaves the host", client.TaskRequest{DestinationID: "orders", Path: "@evil.example.com/"}, "path"},
	} {
		_, _, err := c.CreateTask(ctx, tc.req)
		wantAPIError(t, tc.name, err, client.ErrInvalid, 400, tc.field)
	}

	page, err := c.ListTasks(ctx, client.TaskQuery{DestinationID: "orders"})
	if err != nil || len(page.Items) != 3 {
		t.Fatalf("ListTasks of the destination = %+v, %v; want its 3 tasks", page, err)
	}
	for _, task := range page.Items {
		if task.DestinationID != "orders" {
			t.Errorf("listed %+v, not of the destination", task)
		}
	}
	_, err = c.ListTasks(ctx, client.TaskQuery{DestinationID: "orders", TargetHost: "api.example.com"})
	wantAPIError(t, "destination and target host", err, client.ErrInvalid, 400, "destinationId")

	// Deleting is refused while live tasks name the destination.
	err = c.DeleteDestination(ctx, "orders")
	wantAPIError(t, "delete with live tasks", err, client.ErrConflict, 409, "destinationId")
	for _, task := range page.Items {
		if _, err := c.CancelTask(ctx, task.TaskID); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.DeleteDestination(ctx, "orders"); err != nil {
		t.Fatalf("DeleteDestination after cancelling its tasks: %v", err)
	}
	if _, err := c.GetDestination(ctx, "orders"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("GetDestination after delete = %v, want ErrNotFound", err)
	}
	if err := c.DeleteDestination(ctx, "orders"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("second DeleteDestination = %v, want ErrNotFound", err)
	}
}

func TestListDestinations(t *testing.T) {
	t.Parallel()
	c, _ := setupDestinations(t)
	ctx := context.Background()
	for _, id := range []string{"c", "a", "b"} {
		if _, _, err := c.CreateDestination(ctx, client.Destination{ID: id, URL: "https://" + id + ".example.com/"}); err != nil {
			t.Fatal(err)
		}
	}
	first, err := c.ListDestinations(ctx, client.ListOptions{Limit: 2})
	if err != nil || len(first.Items) != 2 || first.Items[0].ID != "a" || first.Items[1].ID != "b" || first.NextPageToken == "" {
		t.Fatalf("first page = %+v, %v; want a and b, and a token", first, err)
	}
	rest, err := c.ListDestinations(ctx, client.ListOptions{Limit: 2, PageToken: first.NextPageToken})
	if err != nil || len(rest.Items) != 1 || rest.Items[0].ID != "c" || rest.NextPageToken != "" {
		t.Errorf("second page = %+v, %v; want c, the last", rest, err)
	}
}

// A retryd without a secrets key answers 503 to the destination routes.
func TestDestinationsWithoutKeys(t *testing.T) {
	t.Parallel()
	c, _ := setup(t)
	_, err := c.ListDestinations(context.Background(), client.ListOptions{})
	var ae *client.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusServiceUnavailable || ae.Code != "unavailable" {
		t.Errorf("ListDestinations without keys = %v, want a 503", err)
	}
}

func TestSecretJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s    client.Secret
		json string
	}{
		{client.Secret{Value: "x"}, `"x"`},
		{client.Secret{Value: "x", Set: true}, `"x"`},
		{client.Secret{Set: true}, `{"set":true}`},
		{client.Secret{}, `null`},
	} {
		if got := mustJSON(t, tc.s); got != tc.json {
			t.Errorf("%+v encodes as %s, want %s", tc.s, got, tc.json)
		}
	}
	for in, want := range map[string]client.Secret{
		`"x"`: {Value: "x", Set: true}, `{"set":true}`: {Set: true}, ` { "set" : true } `: {Set: true}, `null`: {},
	} {
		var got client.Secret
		if err := json.Unmarshal([]byte(in), &got); err != nil || got != want {
			t.Errorf("%s decodes as %+v, %v; want %+v", in, got, err, want)
		}
	}
	var s client.Secret
	if err := json.Unmarshal([]byte(`7`), &s); err == nil {
		t.Errorf("7 decodes as a secret: %+v", s)
	}
	// Zero secrets are left out; printing never shows a value.
	a := client.DestinationAuth{Type: client.AuthBearer, Token: client.Secret{Value: "tok"}}
	if got := mustJSON(t, a); got != `{"type":"bearer","token":"tok"}` {
		t.Errorf("auth encodes as %s", got)
	}
	if got := fmt.Sprintf("%+v %v", a, &a); strings.Contains(got, "tok") || !strings.Contains(got, "Token:••••") {
		t.Errorf("printed auth = %s, want its token masked", got)
	}
}

// A destination that keeps the Retrykit-* headers off its attempts says
// so when read back.
func TestDestinationAttemptHeaders(t *testing.T) {
	t.Parallel()
	c, _ := setupDestinations(t)
	ctx := context.Background()
	off := false
	d, _, err := c.CreateDestination(ctx, client.Destination{ID: "quiet", URL: "https://example.com", AttemptHeaders: &off})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.GetDestination(ctx, d.ID)
	if err != nil || got.AttemptHeaders == nil || *got.AttemptHeaders {
		t.Errorf("GetDestination = %+v, %v; want attemptHeaders false", got, err)
	}
}
