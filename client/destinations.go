package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// DestinationStatus says whether a destination's tasks are sent now.
type DestinationStatus string

// The destination states.
const (
	DestinationActive DestinationStatus = "ACTIVE" // attempts go
	// DestinationPaused holds attempts, uncharged, until ResumeDestination.
	DestinationPaused DestinationStatus = "PAUSED"
	// DestinationDisabled is a destination whose every attempt failed for
	// its AutoDisable.AfterMs: attempts wait until ResumeDestination.
	DestinationDisabled DestinationStatus = "DISABLED"
)

// The types of DestinationAuth, as DestinationAuth.Type spells them.
const (
	AuthBearer = "bearer" // Authorization: Bearer <Token>
	AuthBasic  = "basic"  // Authorization: Basic of Username and Password
	AuthHeader = "header" // the header Name: Value
	// AuthOAuth2ClientCredentials sends a bearer token the service gets
	// from TokenURL for ClientID and ClientSecret (with Scopes and
	// Audience, when given), and gets again as it expires.
	AuthOAuth2ClientCredentials = "oauth2ClientCredentials"
)

// SigningStandardWebhooks is the one signing scheme: Standard Webhooks
// (the webhook-id, webhook-timestamp and webhook-signature headers).
const SigningStandardWebhooks = "standard-webhooks"

// DefaultSigningOverlap is how long a rotated-out signing secret goes on
// signing beside the new one when RotateSigningSecret is given no overlap.
const DefaultSigningOverlap = 24 * time.Hour

// NoOverlap, as RotateSigningSecret's overlap, stops the old signing
// secret at once: receivers that still check with it refuse every attempt
// from then on.
const NoOverlap time.Duration = -1

// Secret is a credential of a destination. The service never shows a
// secret it keeps: it answers {"set": true} in its place, which decodes as
// Set with an empty Value. A signing secret the service makes is the one
// exception: the answer that made it (a CreateDestination that created, a
// PatchDestination that gave signing without a secret, a
// RotateSigningSecret) holds it in Value, that once.
//
// In a request, a Secret with a Value gives that secret; one that is only
// Set keeps the secret stored, so that a Destination read, edited and sent
// back as a patch keeps the secrets it did not change. The zero Secret is
// none, and is left out of a Destination's JSON.
type Secret struct {
	Value string // the secret in the clear, when known
	Set   bool   // whether there is a secret
}

// IsZero reports whether s is no secret.
func (s Secret) IsZero() bool { return s.Value == "" && !s.Set }

// String shows whether s is set, never its Value, so that printing a
// Destination does not print its credentials.
func (s Secret) String() string {
	if s.IsZero() {
		return ""
	}
	return "••••"
}

// MarshalJSON writes Value as a JSON string, {"set":true} for a secret
// that is only Set, and null for none.
func (s Secret) MarshalJSON() ([]byte, error) {
	switch {
	case s.Value != "":
		return json.Marshal(s.Value)
	case s.Set:
		return []byte(`{"set":true}`), nil
	}
	return []byte(`null`), nil
}

// UnmarshalJSON reads a JSON string (the secret in the clear), {"set":true}
// (a secret whose value is not shown) or null.
func (s *Secret) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*s = Secret{}
		return nil
	case len(b) > 0 && b[0] == '"':
		var v string
		if err := json.Unmarshal(b, &v); err != nil {
			return fmt.Errorf("secret: %w", err)
		}
		*s = Secret{Value: v, Set: v != ""}
		return nil
	}
	var form struct {
		Set bool `json:"set"`
	}
	if err := json.Unmarshal(b, &form); err != nil {
		return fmt.Errorf(`secret: want a string or {"set": true}: %w`, err)
	}
	*s = Secret{Set: form.Set}
	return nil
}

// Destination is a tenant's named target: where the tasks that name it go
// (URL, followed by each task's path), as whom (Auth, TLS), with what proof
// (Signing), how fast (RateLimit and MaxInFlight, for the whole fleet) and
// whether now (Status). Tasks read their destination at each attempt, so a
// change reaches every pending task.
//
// ID and URL are required to create one; every other setting is optional.
// The fields from Status on are the service's: Status and StatusReason may
// be set by a create or a patch (PauseDestination and ResumeDestination
// say it more plainly), the rest is reported and never sent.
type Destination struct {
	ID  string `json:"destinationId,omitempty"`
	URL string `json:"url,omitempty"` // http(s), no query, fragment or credentials
	// Auth is how attempts authenticate; nil for not at all.
	Auth *DestinationAuth `json:"auth,omitempty"`
	// Headers go with every attempt. Their values are secrets: answers
	// show them as Set only.
	Headers map[string]Secret `json:"headers,omitempty"`
	// Signing signs every attempt; nil for no signature. Given without a
	// Secret, the service makes one (see Secret).
	Signing   *Signing   `json:"signing,omitempty"`
	RateLimit *RateLimit `json:"rateLimit,omitempty"`
	// MaxInFlight caps the attempts in flight at once, for the whole
	// fleet; 0 for no cap.
	MaxInFlight int `json:"maxInFlight,omitempty"`
	// TimeoutMs bounds each attempt; 0 for the service's default. The
	// operator bounds it (retryd's --destination-max-timeout).
	TimeoutMs int64           `json:"timeoutMs,omitempty"`
	TLS       *DestinationTLS `json:"tls,omitempty"`
	// AutoDisable disables the destination when its every attempt has
	// failed for a while; nil never does.
	AutoDisable *AutoDisable `json:"autoDisable,omitempty"`
	// AttemptHeaders, when false, keeps the Retrykit-Task-Id,
	// Retrykit-Attempt and Retrykit-First-Attempt-At headers off the
	// destination's attempts; nil (the default) sends them.
	AttemptHeaders *bool `json:"attemptHeaders,omitempty"`

	Status       DestinationStatus `json:"status,omitempty"` // ACTIVE when created without one
	StatusReason string            `json:"statusReason,omitempty"`
	StatusSince  Millis            `json:"statusSince,omitempty"`  // when Status last changed; 0 for never
	FailingSince Millis            `json:"failingSince,omitempty"` // when the current run of failed attempts began; 0 after a success
	// Version counts the changes of the destination: pass it to
	// PatchDestination to change it only if no one else did since.
	Version   int64  `json:"version,omitempty"`
	CreatedAt Millis `json:"createdAt,omitempty"`
	UpdatedAt Millis `json:"updatedAt,omitempty"`
}

// DestinationAuth is how a destination's attempts authenticate: Type, one
// of the Auth… constants, and that type's fields.
type DestinationAuth struct {
	Type     string `json:"type"`
	Token    Secret `json:"token,omitzero"`     // AuthBearer
	Username string `json:"username,omitempty"` // AuthBasic
	Password Secret `json:"password,omitzero"`  // AuthBasic
	Name     string `json:"name,omitempty"`     // AuthHeader: the header's name
	Value    Secret `json:"value,omitzero"`     // AuthHeader: its value
	// AuthOAuth2ClientCredentials; Scopes and Audience are optional.
	TokenURL     string   `json:"tokenUrl,omitempty"`
	ClientID     string   `json:"clientId,omitempty"`
	ClientSecret Secret   `json:"clientSecret,omitzero"`
	Scopes       []string `json:"scopes,omitempty"`
	Audience     string   `json:"audience,omitempty"`
}

// Signing signs every attempt of a destination with Secret ("whsec_…",
// made by the service when not given). Previous are the secrets
// RotateSigningSecret rotated out, which sign beside Secret until their
// Until, so that receivers have time to take the new one; they are
// reported, never sent.
type Signing struct {
	Scheme   string           `json:"scheme"` // SigningStandardWebhooks; sent as that when empty
	Secret   Secret           `json:"secret,omitzero"`
	Previous []PreviousSecret `json:"previous,omitempty"`
}

// PreviousSecret is a rotated-out signing secret, signing until Until.
type PreviousSecret struct {
	Secret Secret `json:"secret"`
	Until  Millis `json:"until"`
}

// RateLimit caps a destination's attempts a second, for the whole fleet.
// Burst is how many may go at once after a quiet spell; 0 for the
// service's default, 1: attempts evenly spaced.
type RateLimit struct {
	PerSecond float64 `json:"perSecond"`
	Burst     int     `json:"burst,omitempty"`
}

// DestinationTLS is a destination's own trust and identity: a private CA
// (PEM) to verify its server with, and a client certificate and key (PEM)
// for mutual TLS, which go together.
type DestinationTLS struct {
	CACertPEM     string `json:"caCertPem,omitempty"`
	ClientCertPEM string `json:"clientCertPem,omitempty"`
	ClientKeyPEM  Secret `json:"clientKeyPem,omitzero"`
}

// AutoDisable disables a destination whose every attempt has failed for
// AfterMs (at least a minute).
type AutoDisable struct {
	AfterMs int64 `json:"afterMs"`
}

// sendable returns d as a request carries it: without what the service
// keeps itself, which it refuses in a request or ignores, and with the one
// signing scheme when none is named.
func (d Destination) sendable() Destination {
	d.StatusSince, d.FailingSince, d.Version, d.CreatedAt, d.UpdatedAt = 0, 0, 0, 0, 0
	if d.Signing != nil {
		sg := *d.Signing
		sg.Previous = nil
		if sg.Scheme == "" {
			sg.Scheme = SigningStandardWebhooks
		}
		d.Signing = &sg
	}
	return d
}

func destinationPath(id, suffix string) string {
	return "/destinations/" + url.PathEscape(id) + suffix
}

// CreateDestination creates d. created is false when d.ID exists with the
// same settings already (its secrets included): the destination returned is
// that one. Other settings are an *Error matching ErrConflict; change them
// with PatchDestination. The fields the service keeps (Version, the times,
// rotated-out signing secrets) are not sent.
//
// A Secret in d is given by its Value. When d signs and gives no signing
// secret, the service makes one: the destination returned by the create
// that made it holds it in Signing.Secret.Value, and nothing ever shows it
// again, so keep it then.
func (c *Client) CreateDestination(ctx context.Context, d Destination) (stored *Destination, created bool, err error) {
	stored = new(Destination)
	status, err := c.do(ctx, http.MethodPost, "/destinations", nil, d.sendable(), stored)
	if err != nil {
		return nil, false, err
	}
	return stored, status == http.StatusCreated, nil
}

// GetDestination returns one destination, its secrets Set only.
func (c *Client) GetDestination(ctx context.Context, id string) (*Destination, error) {
	return c.destination(ctx, http.MethodGet, destinationPath(id, ""), nil)
}

// ListDestinations returns a page of destinations, by ID.
func (c *Client) ListDestinations(ctx context.Context, o ListOptions) (*Page[Destination], error) {
	page := new(Page[Destination])
	if _, err := c.do(ctx, http.MethodGet, "/destinations", listQuery(o), nil, page); err != nil {
		return nil, err
	}
	return page, nil
}

// PatchDestination changes destination id by a JSON merge patch (RFC
// 7386) and returns it as changed. patch is any value that encodes as a
// JSON object: a map[string]any, in which nil removes a setting
// ({"rateLimit": nil}); a json.RawMessage; or a Destination, whose zero
// fields are left out and so left as they are, and whose service-kept
// fields are not sent. A secret given as a string replaces the one stored;
// {"set": true} (a Secret only Set) keeps it. The destination's ID cannot
// change.
//
// A version other than 0 makes the change conditional: an *Error matching
// ErrConflict unless the destination is at that version (see
// Destination.Version), so that a read-modify-write does not undo another
// one made in between.
func (c *Client) PatchDestination(ctx context.Context, id string, patch any, version int64) (*Destination, error) {
	switch p := patch.(type) {
	case Destination:
		patch = p.sendable()
	case *Destination:
		if p != nil {
			patch = p.sendable()
		}
	}
	body, err := json.Marshal(patch)
	if err != nil {
		return nil, fmt.Errorf("retryd client: encoding the patch: %w", err)
	}
	if version != 0 {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(body, &m); err != nil || m == nil {
			return nil, fmt.Errorf("retryd client: a patch made conditional by a version must be a JSON object: %w", ErrInvalid)
		}
		m["version"], _ = json.Marshal(version)
		if body, err = json.Marshal(m); err != nil {
			return nil, fmt.Errorf("retryd client: encoding the patch: %w", err)
		}
	}
	d := new(Destination)
	if _, err := c.send(ctx, http.MethodPatch, destinationPath(id, ""), nil, body, "application/merge-patch+json", d); err != nil {
		return nil, err
	}
	return d, nil
}

// DeleteDestination deletes destination id. While PENDING or IN_FLIGHT
// tasks name it, it is an *Error matching ErrConflict: cancel them, or let
// them end, first.
func (c *Client) DeleteDestination(ctx context.Context, id string) error {
	_, err := c.do(ctx, http.MethodDelete, destinationPath(id, ""), nil, nil, nil)
	return err
}

// PauseDestination pauses destination id, saying why when reason is not
// empty, and returns it: its tasks' attempts wait, uncharged to their
// policies, until ResumeDestination.
func (c *Client) PauseDestination(ctx context.Context, id, reason string) (*Destination, error) {
	return c.destination(ctx, http.MethodPost, destinationPath(id, "/pause"), reasonBody(reason))
}

// ResumeDestination makes destination id ACTIVE again, paused or
// disabled, and returns it; reason, when not empty, says why. Its count of
// failing time starts anew.
func (c *Client) ResumeDestination(ctx context.Context, id, reason string) (*Destination, error) {
	return c.destination(ctx, http.MethodPost, destinationPath(id, "/resume"), reasonBody(reason))
}

// reasonBody is the body of a pause or resume: none without a reason.
func reasonBody(reason string) any {
	if reason == "" {
		return nil
	}
	return map[string]string{"reason": reason}
}

// RotateSigningSecret gives destination id a new signing secret, made by
// the service, and returns the destination with it in Signing.Secret.Value:
// the one time it is shown. The secret it replaces goes on signing beside
// it for overlap, so that receivers have time to take the new one: 0 means
// DefaultSigningOverlap, NoOverlap (any negative overlap) none; the service
// allows up to 30 days. A destination that does not sign is an *Error
// matching ErrInvalid.
func (c *Client) RotateSigningSecret(ctx context.Context, id string, overlap time.Duration) (*Destination, error) {
	var in any
	if overlap != 0 {
		var ms int64
		if overlap > 0 {
			ms = overlap.Milliseconds()
			if time.Duration(ms)*time.Millisecond < overlap {
				ms++ // rounded up: an overlap is never cut short
			}
		}
		in = map[string]int64{"overlapMs": ms}
	}
	return c.destination(ctx, http.MethodPost, destinationPath(id, "/signing-secret/rotate"), in)
}

func (c *Client) destination(ctx context.Context, method, path string, in any) (*Destination, error) {
	d := new(Destination)
	if _, err := c.do(ctx, method, path, nil, in, d); err != nil {
		return nil, err
	}
	return d, nil
}
