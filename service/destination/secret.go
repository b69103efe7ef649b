package destination

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Secret is a credential in one of three forms, and its JSON says which:
//
//   - given by a client: a JSON string, the secret in the clear. It is
//     never written back out: marshalling a Secret in this form fails.
//   - sealed at rest: {"sealed": "<token>"}, the token a Sealer made.
//   - masked in answers: {"set": true}. A client that sends it back (a
//     GET's answer edited and PUT or PATCHed) keeps the secret it has.
//
// The zero Secret is no secret.
type Secret struct {
	plain  string
	sealed string
	set    bool
}

// NewSecret returns a secret given in the clear.
func NewSecret(plain string) Secret { return Secret{plain: plain} }

// IsZero reports whether s holds no secret (omitzero leaves it out).
func (s Secret) IsZero() bool { return s.plain == "" && s.sealed == "" && !s.set }

// Plain returns the secret in the clear: as given, or once Open has
// opened it; "" otherwise.
func (s Secret) Plain() string { return s.plain }

// Keep reports whether s is the masked form, which asks to keep the
// secret already stored.
func (s Secret) Keep() bool { return s.set && s.plain == "" && s.sealed == "" }

// errClear is the error of a Secret marshalled in the clear.
var errClear = errors.New("destination: a secret in the clear is never encoded")

// MarshalJSON writes the sealed or masked form; see Secret.
func (s Secret) MarshalJSON() ([]byte, error) {
	switch {
	case s.sealed != "":
		return append(append([]byte(`{"sealed":`), strconv.Quote(s.sealed)...), '}'), nil
	case s.set:
		return []byte(`{"set":true}`), nil
	case s.plain != "":
		return nil, errClear
	}
	return []byte(`null`), nil
}

// UnmarshalJSON reads any of the three forms; see Secret.
func (s *Secret) UnmarshalJSON(b []byte) error {
	*s = Secret{}
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &s.plain)
	}
	var form struct {
		Sealed *string `json:"sealed"`
		Set    *bool   `json:"set"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&form); err != nil || (form.Sealed == nil) == (form.Set == nil) {
		return errors.New(`a secret is a string, or {"set": true} to keep the one stored`)
	}
	if form.Sealed != nil {
		s.sealed = *form.Sealed
		return nil
	}
	if !*form.Set {
		return errors.New(`{"set": false} is not a secret; leave the field out, or null to remove it`)
	}
	s.set = true
	return nil
}

// Sealer seals secrets at rest and opens them; *secrets.Keyring is one.
// ad binds a sealed secret to its place: one copied elsewhere does not open.
type Sealer interface {
	Seal(plain, ad []byte) string
	Open(token string, ad []byte) ([]byte, error)
}

// secretRef is one secret of a destination and where it sits.
type secretRef struct {
	field string
	s     *Secret
}

// secrets returns every secret of d, with its field's path. It is the one
// list of where a destination keeps secrets: sealing, opening, masking and
// keeping all walk it.
func (d *Destination) secrets() []secretRef {
	var out []secretRef
	if a := d.Auth; a != nil {
		out = append(out, secretRef{"auth.token", &a.Token}, secretRef{"auth.password", &a.Password},
			secretRef{"auth.value", &a.Value}, secretRef{"auth.clientSecret", &a.ClientSecret})
	}
	names := make([]string, 0, len(d.Headers))
	for k := range d.Headers {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		v := d.Headers[k] // a copy: eachSecret writes it back
		out = append(out, secretRef{"headers." + k, &v})
	}
	if sg := d.Signing; sg != nil {
		out = append(out, secretRef{"signing.secret", &sg.Secret})
		// One name for every rotated-out secret: their order changes as
		// they expire, and a sealed secret is bound to its name.
		for i := range sg.Previous {
			out = append(out, secretRef{"signing.previous", &sg.Previous[i].Secret})
		}
	}
	if t := d.TLS; t != nil {
		out = append(out, secretRef{"tls.clientKeyPem", &t.ClientKeyPEM})
	}
	return out
}

// eachSecret calls f with each secret of d and writes back what it changed,
// headers included (a map of values cannot be changed through a pointer).
func (d *Destination) eachSecret(f func(field string, s *Secret) error) error {
	for _, ref := range d.secrets() {
		if ref.s.IsZero() {
			continue
		}
		if err := f(ref.field, ref.s); err != nil {
			return err
		}
		if name, ok := strings.CutPrefix(ref.field, "headers."); ok {
			d.Headers[name] = *ref.s
		}
	}
	return nil
}

// additional is the additional data a secret is sealed with: its tenant,
// destination and field, so that a sealed secret moved elsewhere in the
// store does not open.
func additional(tenant, id, field string) []byte {
	return []byte(tenant + "\x00" + id + "\x00" + field)
}

// Seal seals every secret of d given in the clear, for tenant's
// destination d.ID; those sealed already stay as they are. A masked secret
// left (one Keep asked for that had nothing to keep) is an error.
func (d *Destination) Seal(k Sealer, tenant string) error {
	return d.eachSecret(func(field string, s *Secret) error {
		switch {
		case s.plain != "":
			*s = Secret{sealed: k.Seal([]byte(s.plain), additional(tenant, d.ID, field))}
		case s.Keep():
			return Problems{{field, `{"set": true} keeps a secret, but none is stored; give its value`}}
		}
		return nil
	})
}

// Open opens every sealed secret of d in place: what dispatch needs to
// send. It fails if any does not open (a key that is gone, a token moved).
func (d *Destination) Open(k Sealer, tenant string) error {
	return d.eachSecret(func(field string, s *Secret) error {
		if s.sealed == "" {
			return nil
		}
		plain, err := k.Open(s.sealed, additional(tenant, d.ID, field))
		if err != nil {
			return fmt.Errorf("destination %s: open %s: %w", d.ID, field, err)
		}
		*s = Secret{plain: string(plain)}
		return nil
	})
}

// Reseal seals again under reseal's answer every sealed secret of d:
// what a key rotation does. changed reports whether any token changed.
func (d *Destination) Reseal(reseal func(token string, ad []byte) (string, bool, error), tenant string) (changed bool, err error) {
	err = d.eachSecret(func(field string, s *Secret) error {
		if s.sealed == "" {
			return nil
		}
		tok, ch, err := reseal(s.sealed, additional(tenant, d.ID, field))
		if err != nil {
			return fmt.Errorf("destination %s: reseal %s: %w", d.ID, field, err)
		}
		s.sealed, changed = tok, changed || ch
		return nil
	})
	return changed, err
}

// Masked returns a copy of d with every secret in its masked form: what
// answers show.
func (d *Destination) Masked() *Destination {
	out := d.Clone()
	_ = out.eachSecret(func(_ string, s *Secret) error {
		*s = Secret{set: true}
		return nil
	})
	return out
}

// Clone returns a deep copy of d.
func (d *Destination) Clone() *Destination {
	out := *d
	if d.Auth != nil {
		a := *d.Auth
		a.Scopes = slices.Clone(a.Scopes)
		out.Auth = &a
	}
	if d.Headers != nil {
		out.Headers = make(map[string]Secret, len(d.Headers))
		for k, v := range d.Headers {
			out.Headers[k] = v
		}
	}
	if d.Signing != nil {
		sg := *d.Signing
		sg.Previous = slices.Clone(sg.Previous)
		out.Signing = &sg
	}
	if d.RateLimit != nil {
		r := *d.RateLimit
		out.RateLimit = &r
	}
	if d.TLS != nil {
		t := *d.TLS
		out.TLS = &t
	}
	if d.AutoDisable != nil {
		a := *d.AutoDisable
		out.AutoDisable = &a
	}
	if d.AttemptHeaders != nil {
		on := *d.AttemptHeaders
		out.AttemptHeaders = &on
	}
	return &out
}

// keepFrom fills each masked secret of d (the client asked to keep it)
// with old's secret at the same field, sealed: a patch or a repeated
// create that echoes {"set": true} keeps what was stored.
func (d *Destination) keepFrom(old *Destination) {
	have := map[string]Secret{}
	for _, ref := range old.secrets() {
		have[ref.field] = *ref.s
	}
	_ = d.eachSecret(func(field string, s *Secret) error {
		if s.Keep() {
			if o, ok := have[field]; ok && !o.IsZero() {
				*s = o
			}
		}
		return nil
	})
}
