package destination_test

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry/service/destination"
	"github.com/retrykit/retry/service/destination/secrets"
)

func keyring(t *testing.T) *secrets.Keyring {
	t.Helper()
	k := make([]byte, secrets.KeySize)
	rand.Read(k)
	kr, err := secrets.NewKeyring(k)
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

var bounds = destination.Bounds{MaxTimeout: time.Minute}

const full = `{"destinationId":"orders","url":"https://api.example.com/v1",
	"auth":{"type":"bearer","token":"tok-SECRET-1"},
	"headers":{"X-Api-Key":"key-SECRET-2"},
	"signing":{"scheme":"standard-webhooks"},
	"rateLimit":{"perSecond":50},"maxInFlight":10,"timeoutMs":45000,
	"autoDisable":{"afterMs":3600000}}`

func TestParseValidateSealMask(t *testing.T) {
	t.Parallel()
	d, err := destination.ParseRequest([]byte(full))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Validate(bounds); err != nil {
		t.Fatalf("Validate() = %v", err)
	}
	if d.Status != destination.Active || d.RateLimit.BurstOrDefault() != destination.DefaultBurst {
		t.Errorf("status %s burst %d, want ACTIVE and the default burst", d.Status, d.RateLimit.BurstOrDefault())
	}
	if _, err := d.Encode(); err == nil {
		t.Fatal("Encode() of secrets in the clear succeeded; it must refuse")
	}
	kr := keyring(t)
	if err := d.Seal(kr, "acme"); err != nil {
		t.Fatal(err)
	}
	spec, err := d.Encode()
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"tok-SECRET-1", "key-SECRET-2"} {
		if bytes.Contains(spec, []byte(secret)) {
			t.Errorf("stored form holds %q: %s", secret, spec)
		}
	}
	masked, err := json.Marshal(destination.Record{Destination: d, Version: 1})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(masked, []byte("sec:")) || bytes.Contains(masked, []byte("SECRET")) ||
		!bytes.Contains(masked, []byte(`"token":{"set":true}`)) || !bytes.Contains(masked, []byte(`"X-Api-Key":{"set":true}`)) {
		t.Errorf("answer = %s, want every secret as {\"set\":true}", masked)
	}

	// Sealed for one tenant, it opens for that tenant only.
	back, err := destination.Decode(spec)
	if err != nil {
		t.Fatal(err)
	}
	other := back.Clone()
	if err := other.Open(kr, "globex"); err == nil {
		t.Error("secrets sealed for tenant acme opened for globex")
	}
	if err := back.Open(kr, "acme"); err != nil {
		t.Fatal(err)
	}
	if got := back.Auth.Token.Plain(); got != "tok-SECRET-1" {
		t.Errorf("opened token = %q", got)
	}
}

func TestValidateNamesEachProblem(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body, field string
	}{
		{"bad id", `{"destinationId":"a b","url":"https://x"}`, "destinationId"},
		{"no url", `{"destinationId":"a"}`, "url"},
		{"url with query", `{"destinationId":"a","url":"https://x/?q=1"}`, "url"},
		{"url with credentials", `{"destinationId":"a","url":"https://u:p@x"}`, "url"},
		{"ftp", `{"destinationId":"a","url":"ftp://x"}`, "url"},
		{"unknown auth", `{"destinationId":"a","url":"https://x","auth":{"type":"magic"}}`, "auth.type"},
		{"bearer without token", `{"destinationId":"a","url":"https://x","auth":{"type":"bearer"}}`, "auth.token"},
		{"field of another type", `{"destinationId":"a","url":"https://x","auth":{"type":"bearer","token":"t","username":"u"}}`, "auth.username"},
		{"oauth2 without client", `{"destinationId":"a","url":"https://x","auth":{"type":"oauth2ClientCredentials","tokenUrl":"https://t","clientSecret":"s"}}`, "auth.clientId"},
		{"reserved header", `{"destinationId":"a","url":"https://x","headers":{"Webhook-Signature":"x"}}`, "headers.Webhook-Signature"},
		{"zero rate", `{"destinationId":"a","url":"https://x","rateLimit":{"perSecond":0}}`, "rateLimit.perSecond"},
		{"negative in flight", `{"destinationId":"a","url":"https://x","maxInFlight":-1}`, "maxInFlight"},
		{"timeout over the bound", `{"destinationId":"a","url":"https://x","timeoutMs":61000}`, "timeoutMs"},
		{"other scheme", `{"destinationId":"a","url":"https://x","signing":{"scheme":"hmac"}}`, "signing.scheme"},
		{"short secret", `{"destinationId":"a","url":"https://x","signing":{"scheme":"standard-webhooks","secret":"whsec_c2hvcnQ="}}`, "signing.secret"},
		{"bad CA", `{"destinationId":"a","url":"https://x","tls":{"caCertPem":"nope"}}`, "tls.caCertPem"},
		{"cert without key", `{"destinationId":"a","url":"https://x","tls":{"clientCertPem":"x"}}`, "tls"},
		{"status", `{"destinationId":"a","url":"https://x","status":"ON"}`, "status"},
		{"auto-disable too soon", `{"destinationId":"a","url":"https://x","autoDisable":{"afterMs":999}}`, "autoDisable.afterMs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d, err := destination.ParseRequest([]byte(tt.body))
			if err == nil {
				err = d.Validate(bounds)
			}
			p, ok := errors.AsType[destination.Problems](err)
			if !ok || !errors.Is(err, destination.ErrInvalid) {
				t.Fatalf("error = %v, want Problems", err)
			}
			for _, fe := range p {
				if fe.Field == tt.field {
					return
				}
			}
			t.Errorf("problems %v name no %q", p, tt.field)
		})
	}
}

func TestParseRefusesWhatRetrydKeeps(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{"destinationId":"a","url":"https://x","auth":{"type":"bearer","token":{"sealed":"sec:v1:x:y"}}}`,
		`{"destinationId":"a","url":"https://x","extra":1}`,
		`{"destinationId":"a","url":"https://x"} {}`,
	} {
		if _, err := destination.ParseRequest([]byte(body)); !errors.Is(err, destination.ErrInvalid) {
			t.Errorf("ParseRequest(%s) = %v, want ErrInvalid", body, err)
		}
	}
}

func TestPatchKeepsAndReplacesSecrets(t *testing.T) {
	t.Parallel()
	kr := keyring(t)
	old, err := destination.ParseRequest([]byte(full))
	if err != nil {
		t.Fatal(err)
	}
	old.Signing.Secret = destination.NewSecret("whsec_" + strings.Repeat("A", 32))
	if err := old.Seal(kr, "acme"); err != nil {
		t.Fatal(err)
	}
	patch := `{"auth":{"token":"tok-NEW"},"headers":{"X-Api-Key":{"set":true},"X-Other":"o"},"rateLimit":null,"status":"PAUSED"}`
	d, err := destination.Patch(old, []byte(patch))
	if err != nil {
		t.Fatal(err)
	}
	if d.RateLimit != nil || d.Status != destination.Paused || d.MaxInFlight != 10 || d.URL != old.URL {
		t.Errorf("patched = %+v", d)
	}
	if err := d.Seal(kr, "acme"); err != nil {
		t.Fatal(err)
	}
	if err := d.Open(kr, "acme"); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{"token": d.Auth.Token.Plain(), "key": d.Headers["X-Api-Key"].Plain(), "other": d.Headers["X-Other"].Plain(),
		"signing": d.Signing.Secret.Plain()}
	want := map[string]string{"token": "tok-NEW", "key": "key-SECRET-2", "other": "o", "signing": "whsec_" + strings.Repeat("A", 32)}
	for k := range want {
		if got[k] != want[k] {
			t.Errorf("%s = %q, want %q", k, got[k], want[k])
		}
	}
	if _, err := destination.Patch(old, []byte(`{"destinationId":"other"}`)); err == nil {
		t.Error("a patch changed the destinationId")
	}
	if _, err := destination.Patch(old, []byte(`[1]`)); err == nil {
		t.Error("a patch that is not an object was taken")
	}
	// Keeping a secret that was never set is an error, not an empty secret.
	d, err = destination.Patch(old, []byte(`{"auth":{"type":"basic","username":"u","password":{"set":true},"token":null}}`))
	if err == nil {
		err = d.Seal(kr, "acme")
	}
	if !errors.Is(err, destination.ErrInvalid) {
		t.Errorf("keeping an unset password = %v, want ErrInvalid", err)
	}
}

func TestRotateSigning(t *testing.T) {
	t.Parallel()
	kr := keyring(t)
	d, err := destination.ParseRequest([]byte(`{"destinationId":"a","url":"https://x","signing":{"scheme":"standard-webhooks","secret":"whsec_` + strings.Repeat("B", 32) + `"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Seal(kr, "t"); err != nil {
		t.Fatal(err)
	}
	now := time.UnixMilli(1_000_000)
	newSecret := "whsec_" + strings.Repeat("C", 32)
	if err := d.RotateSigning(kr, "t", newSecret, now, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := d.RotateSigning(kr, "t", "whsec_"+strings.Repeat("D", 32), now.Add(2*time.Hour), time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := d.Open(kr, "t"); err != nil {
		t.Fatalf("after two rotations the secrets do not open: %v", err)
	}
	// The first secret's overlap ended before the second rotation.
	if len(d.Signing.Previous) != 1 || d.Signing.Previous[0].Secret.Plain() != newSecret ||
		d.Signing.Previous[0].Until != now.Add(3*time.Hour).UnixMilli() {
		t.Errorf("previous = %+v, want only the second secret, until an hour after the second rotation", d.Signing.Previous)
	}
}

func TestTargets(t *testing.T) {
	t.Parallel()
	target := destination.Target("orders", "/o/1?x=2")
	id, path, ok := destination.ParseTarget(target)
	if !ok || id != "orders" || path != "/o/1?x=2" {
		t.Errorf("ParseTarget(%q) = %q, %q, %v", target, id, path, ok)
	}
	for _, s := range []string{"https://orders/x", "destination://orders/x", "destination://bad id:0/x"} {
		if _, _, ok := destination.ParseTarget(s); ok {
			t.Errorf("ParseTarget(%q) took it", s)
		}
	}
	tests := []struct {
		base, path string
		ok         bool
	}{
		{"https://api.example.com/v1", "/orders", true},
		{"https://api.example.com/v1", "?a=1", true},
		{"https://api.example.com/v1", "", true},
		{"https://api.example.com/v1/", "orders", true},
		{"https://api.example.com", "@evil.example/x", false},
		{"https://api.example.com", ".evil.example/x", false},
		{"https://api.example.com", ":8443/x", false},
		{"https://api.example.com", "/a b", false},
		{"https://api.example.com", "/x#frag", false},
	}
	for _, tt := range tests {
		if why := destination.CheckPath(tt.base, tt.path); (why == "") != tt.ok {
			t.Errorf("CheckPath(%q, %q) = %q, want ok %v", tt.base, tt.path, why, tt.ok)
		}
	}
	if p, ok := destination.PathUnder("https://api.example.com/v1", "https://api.example.com/v1/orders/7"); !ok || p != "/orders/7" {
		t.Errorf("PathUnder = %q, %v", p, ok)
	}
	if _, ok := destination.PathUnder("https://api.example.com/v1", "https://api.example.com/v2/orders"); ok {
		t.Error("PathUnder took a URL outside the base")
	}
}

func TestDigestTellsRepeatsFromChanges(t *testing.T) {
	t.Parallel()
	kr := keyring(t)
	digest := func(body string) string {
		d, err := destination.ParseRequest([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		s, err := d.Digest(kr.HMAC)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a := digest(`{"destinationId":"a","url":"https://x","auth":{"type":"bearer","token":"one"}}`)
	if b := digest(`{"url":"https://x","destinationId":"a","auth":{"token":"one","type":"bearer"}}`); a != b {
		t.Error("the same request in another order digests differently")
	}
	if b := digest(`{"destinationId":"a","url":"https://x","auth":{"type":"bearer","token":"two"}}`); a == b {
		t.Error("another token digests the same")
	}
}

func TestHeadersSealOpenMask(t *testing.T) {
	t.Parallel()
	kr := keyring(t)
	names := destination.SecretHeaderNames([]string{"x-vendor-key"})
	in := map[string]string{"authorization": "Bearer supersecret", "X-Vendor-Key": "k123", "Content-Type": "text/plain"}
	sealed := destination.SealHeaders(kr, "acme", "task-1", in, names)
	if in["authorization"] != "Bearer supersecret" {
		t.Error("SealHeaders changed its input")
	}
	for k, v := range sealed {
		if strings.Contains(v, "supersecret") || strings.Contains(v, "k123") {
			t.Errorf("sealed %s = %q", k, v)
		}
	}
	if sealed["Content-Type"] != "text/plain" {
		t.Errorf("an ordinary header was sealed: %q", sealed["Content-Type"])
	}
	masked := destination.MaskHeaders(sealed, secrets.Mask)
	if masked["authorization"] != secrets.Mask || masked["X-Vendor-Key"] != secrets.Mask || masked["Content-Type"] != "text/plain" {
		t.Errorf("masked = %v", masked)
	}
	if _, err := destination.OpenHeaders(kr, "acme", "task-2", sealed); err == nil {
		t.Error("headers sealed for one task opened for another")
	}
	open, err := destination.OpenHeaders(kr, "acme", "task-1", sealed)
	if err != nil || open["authorization"] != "Bearer supersecret" || open["X-Vendor-Key"] != "k123" {
		t.Errorf("OpenHeaders = %v, %v", open, err)
	}
}
