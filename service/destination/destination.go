// Package destination is a tenant's named target: where its tasks go, as
// whom (auth, mutual TLS), with what proof (Standard Webhooks signing), how
// fast (a rate and a cap on requests in flight, held for the whole fleet)
// and whether now (ACTIVE, PAUSED, DISABLED). Tasks name a destination and
// read it at each attempt, so a change reaches every pending task.
//
// This package holds the settings as values: their JSON, validation, merge
// patches and the three forms of a secret (given by a client, sealed at
// rest, masked in answers). Sending lives in package dispatch, holding back
// in package scheduler, storage behind store.Destinations.
package destination

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Status says whether a destination's tasks are sent now.
type Status string

// The statuses, as the API spells them.
const (
	Active   Status = "ACTIVE"   // attempts go
	Paused   Status = "PAUSED"   // attempts wait, uncharged, until resumed
	Disabled Status = "DISABLED" // failing for AutoDisable.AfterMs: attempts wait until resumed
)

// Auth types.
const (
	AuthBearer       = "bearer"
	AuthBasic        = "basic"
	AuthHeader       = "header"
	AuthOAuth2Client = "oauth2ClientCredentials"
)

// SchemeStandardWebhooks is the one signing scheme.
const SchemeStandardWebhooks = "standard-webhooks"

// Limits of the settings, beyond which a destination is refused.
const (
	MaxIDLength  = 128
	MaxURLLength = 2048
	MaxPerSecond = 100_000
	// MinPerSecond is the slowest rate limit: one attempt in a thousand
	// seconds, so that the limiter's schedule stays within its bounds.
	MinPerSecond   = 0.001
	MaxBurst       = 100_000
	MaxInFlightCap = 100_000
	MaxHeaders     = 64
	// MaxReasonLength bounds a statusReason, which answers and the
	// console show.
	MaxReasonLength = 512
	// MinAutoDisable is the shortest AutoDisable.AfterMs, so that a
	// destination is disabled by a run of failures, never by one.
	MinAutoDisable = time.Second
	// DefaultSigningOverlap is how long a rotated-out signing secret still
	// signs beside the new one.
	DefaultSigningOverlap = 24 * time.Hour
)

// Destination is a destination's settings and state. The JSON field names
// are the API's. Secrets are Secret values, whose JSON depends on the form
// (see Secret).
type Destination struct {
	ID          string            `json:"destinationId"`
	URL         string            `json:"url"`
	Auth        *Auth             `json:"auth,omitempty"`
	Headers     map[string]Secret `json:"headers,omitempty"`
	Signing     *Signing          `json:"signing,omitempty"`
	RateLimit   *RateLimit        `json:"rateLimit,omitempty"`
	MaxInFlight int               `json:"maxInFlight,omitempty"`
	TimeoutMs   int64             `json:"timeoutMs,omitempty"`
	TLS         *TLS              `json:"tls,omitempty"`
	AutoDisable *AutoDisable      `json:"autoDisable,omitempty"`
	// AttemptHeaders, false, keeps the Retrykit-Task-Id, Retrykit-Attempt
	// and Retrykit-First-Attempt-At headers off the destination's attempts
	// (a target that refuses headers it does not know, or that must not
	// learn retryd's task IDs); absent or true, they are sent. A pointer,
	// so that a merge patch's null brings back the default.
	AttemptHeaders *bool `json:"attemptHeaders,omitempty"`

	Status       Status `json:"status"`
	StatusReason string `json:"statusReason,omitempty"`
	// StatusSince is when Status last changed (epoch ms): a pause's hold
	// grows with its age.
	StatusSince int64 `json:"statusSince,omitempty"`
	// FailingSince is when the current run of failed attempts began
	// (epoch ms), 0 after a success: what AutoDisable measures.
	FailingSince int64 `json:"failingSince,omitempty"`
}

// Auth says who is calling: one of the Auth… types and its fields.
type Auth struct {
	Type     string `json:"type"`
	Token    Secret `json:"token,omitzero"`     // bearer
	Username string `json:"username,omitempty"` // basic
	Password Secret `json:"password,omitzero"`  // basic
	Name     string `json:"name,omitempty"`     // header
	Value    Secret `json:"value,omitzero"`     // header
	// oauth2ClientCredentials
	TokenURL     string   `json:"tokenUrl,omitempty"`
	ClientID     string   `json:"clientId,omitempty"`
	ClientSecret Secret   `json:"clientSecret,omitzero"`
	Scopes       []string `json:"scopes,omitempty"`
	Audience     string   `json:"audience,omitempty"`
}

// Signing signs every attempt. Secret is the signing secret
// ("whsec_…"); Previous are rotated-out secrets that still sign until
// their Until.
type Signing struct {
	Scheme   string            `json:"scheme"`
	Secret   Secret            `json:"secret,omitzero"`
	Previous []SigningPrevious `json:"previous,omitempty"`
}

// SigningPrevious is a rotated-out signing secret, used beside the current
// one until Until (epoch ms).
type SigningPrevious struct {
	Secret Secret `json:"secret"`
	Until  int64  `json:"until"`
}

// RateLimit caps attempts a second, for the whole fleet. Burst is how many
// may go at once after a quiet spell; 0 means DefaultBurst.
type RateLimit struct {
	PerSecond float64 `json:"perSecond"`
	Burst     int     `json:"burst,omitempty"`
}

// DefaultBurst is the burst of a rate limit that names none: one, so that
// attempts go evenly spaced, and any one-second window holds the rate and
// what the lateness of a few sends crowds into it.
const DefaultBurst = 1

// BurstOrDefault returns r's burst, or DefaultBurst.
func (r *RateLimit) BurstOrDefault() int {
	if r.Burst > 0 {
		return r.Burst
	}
	return DefaultBurst
}

// TLS is a destination's own trust and identity: a private CA to verify the
// target with, and a client certificate for mutual TLS.
type TLS struct {
	CACertPEM     string `json:"caCertPem,omitempty"`
	ClientCertPEM string `json:"clientCertPem,omitempty"`
	ClientKeyPEM  Secret `json:"clientKeyPem,omitzero"`
}

// AutoDisable disables a destination whose every attempt has failed for
// AfterMs.
type AutoDisable struct {
	AfterMs int64 `json:"afterMs"`
}

// FieldError is one problem with one field of a destination.
type FieldError struct {
	Field   string
	Message string
}

// Problems is every problem Validate found, in field order.
type Problems []FieldError

// Error lists the problems on one line.
func (p Problems) Error() string {
	parts := make([]string, len(p))
	for i, fe := range p {
		parts[i] = fe.Field + ": " + fe.Message
	}
	return strings.Join(parts, "; ")
}

// ErrInvalid is wrapped by every error that a client's settings caused.
var ErrInvalid = errors.New("invalid destination")

// errNoKeys is the error of a sealed value met without a key to open it.
var errNoKeys = errors.New("destination: a sealed secret, and no secrets key to open it")

// Is makes Problems an ErrInvalid.
func (p Problems) Is(target error) bool { return target == ErrInvalid }

func (p *Problems) add(field, format string, args ...any) {
	*p = append(*p, FieldError{field, fmt.Sprintf(format, args...)})
}

// SendsAttemptHeaders reports whether d's attempts carry the headers that
// tell the target their task and attempt: unless AttemptHeaders is false.
func (d *Destination) SendsAttemptHeaders() bool {
	return d.AttemptHeaders == nil || *d.AttemptHeaders
}
