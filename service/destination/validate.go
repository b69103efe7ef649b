package destination

import (
	"crypto/tls"
	"crypto/x509"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/retrykit/retry/service/destination/signing"
)

// Bounds are the operator's limits on what a destination may ask for.
type Bounds struct {
	// MaxTimeout is the longest TimeoutMs allowed.
	MaxTimeout time.Duration
}

// Validate reports every problem with d's settings as Problems (an
// ErrInvalid), or nil. Secrets are checked only where they are in the
// clear: a caller validating a change that keeps sealed secrets opens a
// copy first.
func (d *Destination) Validate(b Bounds) error {
	var p Problems
	if !ValidID(d.ID) {
		p.add("destinationId", "must be 1 to %d lower-case letters, digits, '.', '_' or '-'", MaxIDLength)
	}
	if why := checkBaseURL(d.URL); why != "" {
		p.add("url", "%s", why)
	}
	d.validateAuth(&p)
	if len(d.Headers) > MaxHeaders {
		p.add("headers", "at most %d headers", MaxHeaders)
	}
	seen := make(map[string]bool, len(d.Headers)+1)
	if a := d.Auth; a != nil {
		switch a.Type {
		case AuthBearer, AuthBasic, AuthOAuth2Client:
			seen["Authorization"] = true
		case AuthHeader:
			seen[textproto.CanonicalMIMEHeaderKey(a.Name)] = true
		}
	}
	for k, v := range d.Headers {
		canon := textproto.CanonicalMIMEHeaderKey(k)
		if seen[canon] {
			p.add("headers."+k, "is given twice (names are case-insensitive), or is the header auth sets")
		}
		seen[canon] = true
		switch {
		case !httpguts.ValidHeaderFieldName(k):
			p.add("headers", "%q is not a header name", k)
		case reservedHeader(textproto.CanonicalMIMEHeaderKey(k)):
			p.add("headers."+k, "is set by retryd and may not be given")
		case v.plain != "" && !httpguts.ValidHeaderFieldValue(v.plain):
			p.add("headers."+k, "is not a valid header value")
		}
	}
	if sg := d.Signing; sg != nil {
		if sg.Scheme != SchemeStandardWebhooks {
			p.add("signing.scheme", "must be %q", SchemeStandardWebhooks)
		}
		if sg.Secret.plain != "" {
			if _, err := signing.ParseSecret(sg.Secret.plain); err != nil {
				p.add("signing.secret", "%v", err)
			}
		}
		for _, prev := range sg.Previous {
			if prev.Secret.plain != "" {
				if _, err := signing.ParseSecret(prev.Secret.plain); err != nil {
					p.add("signing.previous", "%v", err)
				}
			}
		}
	}
	if r := d.RateLimit; r != nil {
		if !(r.PerSecond >= MinPerSecond && r.PerSecond <= MaxPerSecond) {
			p.add("rateLimit.perSecond", "must be %g to %d", MinPerSecond, MaxPerSecond)
		}
		if r.Burst < 0 || r.Burst > MaxBurst {
			p.add("rateLimit.burst", "must be 0 (the default) to %d", MaxBurst)
		}
	}
	if d.MaxInFlight < 0 || d.MaxInFlight > MaxInFlightCap {
		p.add("maxInFlight", "must be 0 (no cap) to %d", MaxInFlightCap)
	}
	if d.TimeoutMs < 0 || time.Duration(d.TimeoutMs)*time.Millisecond > b.MaxTimeout {
		p.add("timeoutMs", "must be 0 (the default) to %d, the operator's bound", b.MaxTimeout.Milliseconds())
	}
	d.validateTLS(&p)
	switch d.Status {
	case Active, Paused, Disabled:
	default:
		p.add("status", "must be ACTIVE, PAUSED or DISABLED")
	}
	if len(d.StatusReason) > MaxReasonLength {
		p.add("statusReason", "must be at most %d bytes", MaxReasonLength)
	}
	if a := d.AutoDisable; a != nil && time.Duration(a.AfterMs)*time.Millisecond < MinAutoDisable {
		p.add("autoDisable.afterMs", "must be at least %d", MinAutoDisable.Milliseconds())
	}
	if len(p) > 0 {
		return p
	}
	return nil
}

func (d *Destination) validateAuth(p *Problems) {
	a := d.Auth
	if a == nil {
		return
	}
	need := func(field string, ok bool) {
		if !ok {
			p.add("auth."+field, "is required for auth type %s", a.Type)
		}
	}
	given := map[string]bool{
		"token": !a.Token.IsZero(), "username": a.Username != "", "password": !a.Password.IsZero(),
		"name": a.Name != "", "value": !a.Value.IsZero(), "tokenUrl": a.TokenURL != "", "clientId": a.ClientID != "",
		"clientSecret": !a.ClientSecret.IsZero(), "scopes": len(a.Scopes) > 0, "audience": a.Audience != "",
	}
	var fields []string
	switch a.Type {
	case AuthBearer:
		fields = []string{"token"}
	case AuthBasic:
		fields = []string{"username", "password"}
		if strings.Contains(a.Username, ":") {
			p.add("auth.username", "may not contain ':'")
		}
	case AuthHeader:
		fields = []string{"name", "value"}
		if a.Name != "" && (!httpguts.ValidHeaderFieldName(a.Name) || reservedHeader(textproto.CanonicalMIMEHeaderKey(a.Name))) {
			p.add("auth.name", "must be a header name retryd does not set itself")
		}
	case AuthOAuth2Client:
		fields = []string{"tokenUrl", "clientId", "clientSecret", "scopes", "audience"}
		if a.TokenURL != "" {
			if why := checkBaseURL(a.TokenURL); why != "" {
				p.add("auth.tokenUrl", "%s", why)
			}
		}
		given["scopes"], given["audience"] = true, true // optional
	default:
		p.add("auth.type", "must be %s, %s, %s or %s", AuthBearer, AuthBasic, AuthHeader, AuthOAuth2Client)
		return
	}
	allowed := map[string]bool{}
	for _, f := range fields {
		allowed[f] = true
		need(f, given[f])
	}
	for _, f := range []string{"token", "username", "password", "name", "value", "tokenUrl", "clientId", "clientSecret"} {
		if given[f] && !allowed[f] {
			p.add("auth."+f, "does not belong to auth type %s", a.Type)
		}
	}
	for _, s := range []*Secret{&a.Token, &a.Password, &a.Value, &a.ClientSecret} {
		if s.plain != "" && !httpguts.ValidHeaderFieldValue(s.plain) {
			p.add("auth", "a secret holds characters a header cannot carry")
			break
		}
	}
}

func (d *Destination) validateTLS(p *Problems) {
	t := d.TLS
	if t == nil {
		return
	}
	if t.CACertPEM != "" && !x509.NewCertPool().AppendCertsFromPEM([]byte(t.CACertPEM)) {
		p.add("tls.caCertPem", "holds no PEM certificate")
	}
	if (t.ClientCertPEM == "") != t.ClientKeyPEM.IsZero() {
		p.add("tls", "clientCertPem and clientKeyPem go together")
		return
	}
	if t.ClientKeyPEM.plain != "" {
		if _, err := tls.X509KeyPair([]byte(t.ClientCertPEM), []byte(t.ClientKeyPEM.plain)); err != nil {
			p.add("tls.clientKeyPem", "does not make a key pair with clientCertPem: %v", err)
		}
	}
}

// ValidID reports whether id can name a destination: 1 to MaxIDLength
// lower-case letters, digits, '.', '_' or '-', safe in a URL path and in
// logs. Lower case only: a task keeps its destination's ID where a URL's
// host goes (see Target), and hosts compare without regard to case, so
// "Orders" and "orders" could not be told apart there.
func ValidID(id string) bool {
	if id == "" || len(id) > MaxIDLength {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// checkBaseURL returns why u cannot be a destination's base URL, or "".
func checkBaseURL(u string) string {
	if u == "" {
		return "is required"
	}
	if len(u) > MaxURLLength {
		return "must be at most " + strconv.Itoa(MaxURLLength) + " bytes"
	}
	p, err := url.Parse(u)
	if err != nil {
		return "is not a URL"
	}
	if s := strings.ToLower(p.Scheme); s != "http" && s != "https" {
		return "must be an http or https URL"
	}
	if p.Opaque != "" || p.Hostname() == "" {
		return "must name a host (http://host/...)"
	}
	if p.User != nil {
		return "may not carry credentials: use auth"
	}
	if p.RawQuery != "" || p.Fragment != "" || strings.ContainsAny(u, "?#") {
		return "may not have a query or fragment: a task's path adds them"
	}
	if port := p.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return "has port " + port + ": a port is 1 to 65535"
		}
	}
	return ""
}

// reservedHeader reports whether retryd sets the canonical header k itself
// on a destination's attempts: framing, the idempotency key, the
// signature's, the task's and attempt's (refused even where AttemptHeaders
// switches them off, so that they never mean one thing on one destination
// and another elsewhere).
func reservedHeader(k string) bool {
	switch k {
	case "Host", "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive", "Proxy-Connection",
		"Te", "Trailer", "Upgrade", "Idempotency-Key", "Webhook-Id", "Webhook-Timestamp", "Webhook-Signature",
		"Retrykit-Task-Id", "Retrykit-Attempt", "Retrykit-First-Attempt-At":
		return true
	}
	return false
}
