package gate_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// tokenServer is an OAuth2 token endpoint (client credentials) whose
// tokens live for life, and a record of what it issued.
type tokenServer struct {
	*httptest.Server
	life time.Duration

	mu      sync.Mutex
	issued  map[string]time.Time // token → when it expires
	revoked map[string]bool
	fetches int
}

func newTokenServer(t *testing.T, life time.Duration) *tokenServer {
	ts := &tokenServer{life: life, issued: map[string]time.Time{}, revoked: map[string]bool{}}
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, secret, ok := r.BasicAuth()
		if !ok {
			r.ParseForm()
			id, secret = r.PostFormValue("client_id"), r.PostFormValue("client_secret")
		}
		if r.PostFormValue("grant_type") != "client_credentials" || id != "retryd" || secret != "client-SECRET" ||
			r.PostFormValue("audience") != "partner-api" || r.PostFormValue("scope") != "orders:write" {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":"invalid_client"}`)
			return
		}
		ts.mu.Lock()
		ts.fetches++
		tok := fmt.Sprintf("tok-%d", ts.fetches)
		ts.issued[tok] = time.Now().Add(life)
		ts.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": int(life / time.Second)})
	}))
	t.Cleanup(ts.Close)
	return ts
}

// check reports whether auth carries a token this server issued, not
// expired nor revoked, and whether it was one issued at all.
func (ts *tokenServer) check(auth string) (valid, known bool) {
	tok, _ := strings.CutPrefix(auth, "Bearer ")
	ts.mu.Lock()
	defer ts.mu.Unlock()
	exp, known := ts.issued[tok]
	return known && time.Now().Before(exp) && !ts.revoked[tok], known
}

func (ts *tokenServer) revoke(auth string) {
	ts.mu.Lock()
	ts.revoked[strings.TrimPrefix(auth, "Bearer ")] = true
	ts.mu.Unlock()
}

// TestOAuth2ClientCredentials: every attempt carries a token the token
// endpoint issued and had not expired; the instance fetches about one a
// token's life; a token the target refuses is dropped and the attempt
// goes again with a fresh one, uncharged.
func TestOAuth2ClientCredentials(t *testing.T) {
	t.Parallel()
	e := setup(t)
	// The full run under RETRYKIT_LONG=1: 2,000 tasks over 10 s, tokens
	// that live 2 s; a shorter one by default.
	tasks, over, life := 150, 3*time.Second, time.Second
	if os.Getenv("RETRYKIT_LONG") == "1" {
		tasks, over, life = 2000, 10*time.Second, 2*time.Second
	}
	ts := newTokenServer(t, life)
	var expired, unknown, revokedOnce atomic.Int64
	tg := newTarget(t, func(r *http.Request) int {
		auth := r.Header.Get("Authorization")
		valid, known := ts.check(auth)
		switch {
		case !known:
			unknown.Add(1)
			return http.StatusUnauthorized
		case !valid && !strings.HasSuffix(auth, "tok-2"):
			expired.Add(1)
			return http.StatusUnauthorized
		case !valid:
			return http.StatusUnauthorized // revoked
		case strings.HasSuffix(auth, "tok-2") && revokedOnce.CompareAndSwap(0, 1):
			ts.revoke(auth) // the partner revokes the second token while it is in use
			return http.StatusUnauthorized
		}
		return http.StatusOK
	})
	e.call("POST", "/destinations", `{"destinationId":"oauth","url":"`+tg.URL+`",
		"auth":{"type":"oauth2ClientCredentials","tokenUrl":"`+ts.URL+`","clientId":"retryd","clientSecret":"client-SECRET",
		"scopes":["orders:write"],"audience":"partner-api"}}`, http.StatusCreated)
	var ids []string
	start := time.Now()
	for i := range tasks {
		ids = append(ids, e.create(`{"destinationId":"oauth","policyId":"fast"}`).TaskID)
		time.Sleep(time.Until(start.Add(over * time.Duration(i+1) / time.Duration(tasks))))
	}
	for _, id := range ids {
		if tk := e.wait(id, "SUCCEEDED"); tk.AttemptNumber != 1 {
			t.Errorf("task %s charged %d attempts (lastError %q); a refused token must cost none", id, tk.AttemptNumber, tk.LastError)
		}
	}
	elapsed := time.Since(start)
	if n := expired.Load() + unknown.Load(); n > 0 {
		t.Errorf("%d attempts carried an expired (%d) or unknown (%d) token", n, expired.Load(), unknown.Load())
	}
	ts.mu.Lock()
	fetches := ts.fetches
	ts.mu.Unlock()
	// One a token's life, one more after the revocation, one for the start.
	if most := int(elapsed/ts.life) + 2; fetches > most {
		t.Errorf("%d tokens fetched in %v, want at most %d", fetches, elapsed.Round(time.Millisecond), most)
	}
	if revokedOnce.Load() != 1 {
		t.Error("the test never revoked a token")
	}
	t.Logf("%d tasks, %d tokens fetched in %v", tasks, fetches, elapsed.Round(time.Millisecond))
}

// TestOAuth2TokenEndpointFails: a token endpoint that refuses is the
// attempt's error, charged, with its own cause.
func TestOAuth2TokenEndpointFails(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ts := newTokenServer(t, time.Second)
	tg := newTarget(t, nil)
	e.call("POST", "/destinations", `{"destinationId":"oauth","url":"`+tg.URL+`",
		"auth":{"type":"oauth2ClientCredentials","tokenUrl":"`+ts.URL+`","clientId":"retryd","clientSecret":"wrong"}}`, http.StatusCreated)
	e.call("POST", "/retry-policies", `{"policyId":"two","backoff":"FIXED","initialDelayMs":50,"maxAttempts":2,"jitterType":"NONE"}`, http.StatusCreated)
	tk := e.create(`{"destinationId":"oauth","policyId":"two"}`)
	done := e.wait(tk.TaskID, "EXHAUSTED")
	if done.AttemptNumber != 2 || !strings.Contains(done.LastError, "oauth2 token") {
		t.Errorf("task = %+v, want 2 attempts failed on the token", done)
	}
	if n := len(tg.requests()); n != 0 {
		t.Errorf("the target saw %d requests without a token", n)
	}
}

// TestMutualTLS: a destination's own CA verifies a target whose
// certificate no system root signed, and its client certificate gets it
// past a target that requires one.
func TestMutualTLS(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ca := newCA(t)
	serverCert := ca.issue(t, "target", x509.ExtKeyUsageServerAuth)
	client := ca.issue(t, "retryd-client", x509.ExtKeyUsageClientAuth)
	var peer atomic.Value
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		peer.Store(r.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.pool, Certificates: []tls.Certificate{serverCert.pair}}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	e.call("POST", "/destinations", `{"destinationId":"mtls","url":"`+srv.URL+`","tls":{"caCertPem":`+jsonString(ca.pem)+
		`,"clientCertPem":`+jsonString(client.certPEM)+`,"clientKeyPem":`+jsonString(client.keyPEM)+`}}`, http.StatusCreated)
	e.call("POST", "/destinations", `{"destinationId":"no-client","url":"`+srv.URL+`","tls":{"caCertPem":`+jsonString(ca.pem)+`}}`, http.StatusCreated)
	e.call("POST", "/destinations", `{"destinationId":"no-ca","url":"`+srv.URL+`"}`, http.StatusCreated)
	e.call("POST", "/retry-policies", `{"policyId":"once","maxAttempts":1}`, http.StatusCreated)
	ok := e.create(`{"destinationId":"mtls","policyId":"once"}`)
	noClient := e.create(`{"destinationId":"no-client","policyId":"once"}`)
	noCA := e.create(`{"destinationId":"no-ca","policyId":"once"}`)
	e.wait(ok.TaskID, "SUCCEEDED")
	if got, _ := peer.Load().(string); got != "retryd-client" {
		t.Errorf("the target saw client certificate %q", got)
	}
	for _, id := range []string{noClient.TaskID, noCA.TaskID} {
		if tk := e.wait(id, "EXHAUSTED"); tk.LastError == "" {
			t.Errorf("task %s failed without an error", id)
		}
	}
	if tk := e.get(noCA.TaskID); !strings.Contains(tk.LastError, "certificate") {
		t.Errorf("without the CA, lastError = %q, want a certificate error", tk.LastError)
	}
	if b := e.call("GET", "/destinations/mtls", "", http.StatusOK); strings.Contains(string(b), "PRIVATE KEY") {
		t.Errorf("the client key is in an answer: %s", b)
	}
}

// TestInFlightAndRate: maxInFlight caps the requests open at the target,
// rateLimit the requests a second, and the tasks held for either are
// charged nothing.
func TestInFlightAndRate(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var open, most atomic.Int64
	slow := newTarget(t, func(*http.Request) int {
		n := open.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(100 * time.Millisecond)
		open.Add(-1)
		return http.StatusOK
	})
	paced := newTarget(t, nil)
	e.call("POST", "/destinations", `{"destinationId":"slow","url":"`+slow.URL+`","maxInFlight":3}`, http.StatusCreated)
	e.call("POST", "/destinations", `{"destinationId":"paced","url":"`+paced.URL+`","rateLimit":{"perSecond":20,"burst":2}}`, http.StatusCreated)
	var ids []string
	for range 24 {
		ids = append(ids, e.create(`{"destinationId":"slow","policyId":"fast"}`).TaskID)
	}
	for range 40 {
		ids = append(ids, e.create(`{"destinationId":"paced","policyId":"fast"}`).TaskID)
	}
	for _, id := range ids {
		if tk := e.wait(id, "SUCCEEDED"); tk.AttemptNumber != 1 {
			t.Errorf("task %s charged %d attempts: held attempts cost none", id, tk.AttemptNumber)
		}
	}
	if m := most.Load(); m > 3 || m < 2 {
		t.Errorf("at most %d requests were open at once, want up to maxInFlight 3", m)
	}
	got := paced.requests()
	for i := range got {
		n := 0
		for j := i; j < len(got) && got[j].At.Sub(got[i].At) < time.Second; j++ {
			n++
		}
		if n > 22 {
			t.Errorf("%d requests within a second from request %d, want at most rate + burst", n, i)
			break
		}
	}
	if span := got[len(got)-1].At.Sub(got[0].At); span < 1700*time.Millisecond {
		t.Errorf("40 requests at 20/s went in %v", span)
	}
}

// ca is a certificate authority a test makes.
type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  string
	pool *x509.CertPool
}

type issued struct {
	pair            tls.Certificate
	certPEM, keyPEM string
}

func newCA(t *testing.T) *ca {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &ca{cert: cert, key: key, pem: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), pool: pool}
}

func (c *ca) issue(t *testing.T, cn string, usage x509.ExtKeyUsage) issued {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{usage},
		KeyUsage: x509.KeyUsageDigitalSignature, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	out := issued{certPEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		keyPEM: string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}))}
	out.pair, err = tls.X509KeyPair([]byte(out.certPEM), []byte(out.keyPEM))
	if err != nil {
		t.Fatal(err)
	}
	return out
}
