package destination

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ParseRequest decodes a destination as a client gives it to be created:
// one JSON object of the API's fields, none unknown, secrets in the clear
// (a masked one has nothing to keep: Seal refuses it). Status defaults to
// ACTIVE. The state retryd keeps (statusSince, failingSince, rotated-out
// signing secrets) cannot be given. It does not Validate.
func ParseRequest(data []byte) (*Destination, error) {
	d, err := decode(data)
	if err != nil {
		return nil, err
	}
	if d.Status == "" {
		d.Status = Active
	}
	d.StatusSince, d.FailingSince = 0, 0
	if d.Signing != nil {
		d.Signing.Previous = nil
	}
	return d, refuseSealed(d)
}

// fields names the members of a destination's JSON objects, exactly as
// they are spelled: encoding/json would take "URL" for "url", and a merge
// patch would then keep both. nil marks a map of any names (headers).
var fields = map[string]map[string]bool{
	"": set("destinationId", "url", "auth", "headers", "signing", "rateLimit", "maxInFlight", "timeoutMs", "tls",
		"autoDisable", "attemptHeaders", "status", "statusReason", "statusSince", "failingSince"),
	"auth": set("type", "token", "username", "password", "name", "value", "tokenUrl", "clientId", "clientSecret",
		"scopes", "audience"),
	"signing":     set("scheme", "secret", "previous"),
	"rateLimit":   set("perSecond", "burst"),
	"tls":         set("caCertPem", "clientCertPem", "clientKeyPem"),
	"autoDisable": set("afterMs"),
}

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// checkNames refuses a member of m, a destination's JSON or a merge patch
// of it, whose name is not spelled as the API spells it.
func checkNames(m map[string]any) error {
	for k, v := range m {
		if !fields[""][k] {
			return Problems{{k, "unknown field"}}
		}
		sub, ok := v.(map[string]any)
		if want := fields[k]; ok && want != nil {
			for sk := range sub {
				if !want[sk] {
					return Problems{{k + "." + sk, "unknown field"}}
				}
			}
		}
	}
	return nil
}

// decode reads a destination's JSON strictly: unknown fields are problems.
func decode(data []byte) (*Destination, error) {
	var m map[string]any
	if err := json.Unmarshal(data, &m); err == nil {
		if err := checkNames(m); err != nil {
			return nil, err
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var d Destination
	if err := dec.Decode(&d); err != nil {
		return nil, Problems{{fieldOf(err), strings.TrimPrefix(err.Error(), "json: ")}}
	}
	if dec.More() {
		return nil, Problems{{"", "more than one JSON value"}}
	}
	return &d, nil
}

// fieldOf names the field a decoding error is about, where it says.
func fieldOf(err error) string {
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		return te.Field
	}
	if msg, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return strings.Trim(msg, `"`)
	}
	return ""
}

// refuseSealed refuses secrets in the sealed form from a client: only
// retryd seals.
func refuseSealed(d *Destination) error {
	return d.eachSecret(func(field string, s *Secret) error {
		if s.sealed != "" {
			return Problems{{field, `a secret is a string, or {"set": true} to keep the one stored`}}
		}
		return nil
	})
}

// Decode reads a destination as Encode wrote it.
func Decode(spec []byte) (*Destination, error) {
	var d Destination
	if err := json.Unmarshal(spec, &d); err != nil {
		return nil, fmt.Errorf("destination: decode: %w", err)
	}
	return &d, nil
}

// Encode returns the form a store keeps: every secret sealed (a secret in
// the clear is an error, never written).
func (d *Destination) Encode() ([]byte, error) {
	b, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("destination %s: encode: %w", d.ID, err)
	}
	return b, nil
}

// Record is a destination as answers show it: its settings, secrets
// masked, with the store's version and times (epoch ms).
type Record struct {
	*Destination
	Version   int64 `json:"version"`
	CreatedAt int64 `json:"createdAt"`
	UpdatedAt int64 `json:"updatedAt"`
}

// MarshalJSON masks the secrets whatever form they are in.
func (r Record) MarshalJSON() ([]byte, error) {
	type plain Record // without this method
	return json.Marshal(plain{r.Destination.Masked(), r.Version, r.CreatedAt, r.UpdatedAt})
}

// Patch applies a JSON merge patch (RFC 7386) to old, as a client sees it
// (secrets masked), and returns the destination it makes: a secret the patch
// leaves alone or sets to {"set": true} is kept, one it gives is new, one it
// sets to null is removed. The destinationId cannot change. State retryd
// keeps (statusSince, failingSince) stays as it was; the caller sets it
// when the patch changes the status. It does not Validate.
func Patch(old *Destination, patch []byte) (*Destination, error) {
	var p any
	dec := json.NewDecoder(bytes.NewReader(patch))
	dec.UseNumber()
	if err := dec.Decode(&p); err != nil || dec.More() {
		return nil, Problems{{"", "a merge patch is one JSON value"}}
	}
	pm, ok := p.(map[string]any)
	if !ok {
		return nil, Problems{{"", "a merge patch of a destination is a JSON object"}}
	}
	if err := checkNames(pm); err != nil {
		return nil, err
	}
	if id, ok := pm["destinationId"]; ok && id != old.ID {
		return nil, Problems{{"destinationId", "cannot change; create another destination"}}
	}
	for _, k := range []string{"statusSince", "failingSince"} {
		if _, ok := pm[k]; ok {
			return nil, Problems{{k, "is kept by retryd and cannot be set"}}
		}
	}
	masked, err := json.Marshal(old.Masked())
	if err != nil {
		return nil, fmt.Errorf("destination %s: %w", old.ID, err)
	}
	var doc any
	dec = json.NewDecoder(bytes.NewReader(masked))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("destination %s: %w", old.ID, err)
	}
	merged, err := json.Marshal(mergePatch(doc, pm))
	if err != nil {
		return nil, fmt.Errorf("destination %s: %w", old.ID, err)
	}
	d, err := decode(merged)
	if err != nil {
		return nil, err
	}
	if err := refuseSealed(d); err != nil {
		return nil, err
	}
	d.keepFrom(old)
	d.StatusSince, d.FailingSince = old.StatusSince, old.FailingSince
	if d.Signing != nil {
		// Rotated-out secrets change only by a rotation, never a patch.
		d.Signing.Previous = nil
		if old.Signing != nil {
			d.Signing.Previous = old.Signing.Previous
		}
	}
	return d, nil
}

// mergePatch applies patch to target as RFC 7386 says.
func mergePatch(target, patch any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	tm, ok := target.(map[string]any)
	if !ok {
		tm = map[string]any{}
	}
	for k, v := range pm {
		if v == nil {
			delete(tm, k)
		} else {
			tm[k] = mergePatch(tm[k], v)
		}
	}
	return tm
}

// Digest returns a digest of d's settings as a client gave them, secrets
// in the clear included, under mac (a keyed hash, so that the digest a
// store keeps tells nothing of the secrets): what tells an idempotent
// repeat of a create from a conflicting one.
func (d *Destination) Digest(mac func([]byte) []byte) (string, error) {
	var buf bytes.Buffer
	masked, err := json.Marshal(d.Masked())
	if err != nil {
		return "", err
	}
	buf.Write(masked)
	for _, ref := range d.secrets() {
		buf.WriteByte(0)
		buf.WriteString(ref.field)
		buf.WriteByte(0)
		buf.WriteString(ref.s.plain)
	}
	return hex.EncodeToString(mac(buf.Bytes())), nil
}
