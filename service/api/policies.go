package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/service/hostlimit"
	"github.com/retrykit/retry/service/store"
)

// parsePolicy decodes a policy registration: policyId, and the rest through
// retry.Policy's own decoder, which defaults omitted fields and reports
// every bad field. The spec returned is the policy's canonical encoding, so
// an identical registration yields identical bytes.
func parsePolicy(data []byte) (id string, spec []byte, err error) {
	m, err := parseObject(data)
	if err != nil {
		return "", nil, err
	}
	f := &fields{m: m}
	id, _ = f.check("policyId", true, checkPolicyID)
	delete(m, "policyId")
	var host hostlimit.Setting
	if raw, ok := m[hostlimit.Field]; ok {
		delete(m, hostlimit.Field)
		if string(raw) != "null" {
			if host, err = hostlimit.ParseSetting(raw); err != nil {
				f.problems = append(f.problems, policyProblems(err)...)
			}
		}
	}
	rest, err := json.Marshal(m)
	if err != nil {
		return "", nil, fmt.Errorf("re-encoding a policy: %w", err)
	}
	var p retry.Policy
	if err := json.Unmarshal(rest, &p); err != nil {
		f.problems = append(f.problems, policyProblems(err)...)
	}
	if err := f.err(); err != nil {
		return "", nil, err
	}
	spec, err = hostlimit.Encode(&p, host)
	if err != nil {
		return "", nil, fmt.Errorf("encoding a decoded policy: %w", err)
	}
	return id, spec, nil
}

func (s *server) policyPut(w http.ResponseWriter, r *http.Request, tenant string) error {
	data, err := s.readBody(w, r, s.maxBody)
	if err != nil {
		return err
	}
	id, spec, err := parsePolicy(data)
	if err != nil {
		return err
	}
	p, created, err := s.store.PolicyPut(r.Context(), &store.Policy{Tenant: tenant, ID: id, Spec: spec, CreatedAt: s.now()})
	if errors.Is(err, store.ErrConflict) {
		p, err = s.samePolicy(r, tenant, id, spec)
	}
	if errors.Is(err, store.ErrConflict) {
		return errorf(http.StatusConflict, CodeConflict, "policyId",
			"policy %q is registered with other settings; policies are immutable, register a new policyId", id)
	}
	if err != nil {
		return storeError(err, "policy")
	}
	// The tasks that follow a registration find their policy without a read.
	s.policies.add(policyKey{tenant, id})
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return s.writePolicy(w, status, p)
}

// samePolicy returns the stored policy id when its spec, encoded as this
// retryd encodes policies, is spec: a policy registered by an older retryd,
// whose encoding had fewer fields, is the same policy. Else ErrConflict.
func (s *server) samePolicy(r *http.Request, tenant, id string, spec []byte) (*store.Policy, error) {
	p, err := s.store.PolicyGet(r.Context(), tenant, id)
	if err != nil {
		return nil, err
	}
	old, host, err := hostlimit.Decode(p.Spec)
	if err != nil {
		return nil, store.ErrConflict
	}
	if again, err := hostlimit.Encode(old, host); err != nil || !bytes.Equal(again, spec) {
		return nil, store.ErrConflict
	}
	return p, nil
}

func (s *server) policyGet(w http.ResponseWriter, r *http.Request, tenant string) error {
	id := r.PathValue("policyId")
	if checkPolicyID(id) != "" {
		return errorf(http.StatusNotFound, CodeNotFound, "", "policy not found")
	}
	p, builtin, err := store.LookupPolicy(r.Context(), s.store, tenant, id)
	if err != nil {
		return storeError(err, "policy")
	}
	b, err := policyJSON(p, builtin)
	if err != nil {
		return err
	}
	s.writeJSON(w, http.StatusOK, b)
	return nil
}

func (s *server) policyList(w http.ResponseWriter, r *http.Request, tenant string) error {
	q, err := parseQuery(r, "pageToken", "limit")
	if err != nil {
		return err
	}
	items, next, err := s.store.PolicyList(r.Context(), tenant, q.page)
	if err != nil {
		return listError(err, q)
	}
	at, err := s.builtinPlace(r.Context(), tenant, q.page.Token == "", items, next)
	if err != nil {
		return listError(err, q)
	}
	out := make([]json.RawMessage, 0, len(items)+1)
	for i := 0; i <= len(items); i++ {
		if i == at {
			b, err := policyJSON(store.BuiltinDefault(tenant), true)
			if err != nil {
				return err
			}
			out = append(out, b)
		}
		if i < len(items) {
			b, err := policyJSON(items[i], false)
			if err != nil {
				return err
			}
			out = append(out, b)
		}
	}
	s.writeJSON(w, http.StatusOK, list[json.RawMessage]{out, next})
	return nil
}

func (s *server) writePolicy(w http.ResponseWriter, status int, p *store.Policy) error {
	b, err := policyJSON(p, false)
	if err != nil {
		return err
	}
	s.writeJSON(w, status, b)
	return nil
}

// policyJSON renders a stored policy: its policyId, "builtin": true for the
// built-in default, then its spec's fields.
func policyJSON(p *store.Policy, builtin bool) (json.RawMessage, error) {
	spec := bytes.TrimSpace(p.Spec)
	if len(spec) < 2 || spec[0] != '{' {
		return nil, fmt.Errorf("policy %q: stored spec is not a JSON object", p.ID)
	}
	id, _ := json.Marshal(p.ID)
	var b bytes.Buffer
	b.WriteString(`{"policyId":`)
	b.Write(id)
	if builtin {
		b.WriteString(`,"builtin":true`)
	}
	if rest := bytes.TrimSpace(spec[1:]); len(rest) > 0 && rest[0] != '}' {
		b.WriteByte(',')
	}
	b.Write(spec[1:])
	return b.Bytes(), nil
}
