package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"time"

	"github.com/retrykit/retry/service/destination"
	"github.com/retrykit/retry/service/destination/secrets"
	"github.com/retrykit/retry/service/destination/signing"
	"github.com/retrykit/retry/service/store"
)

// destinations returns the store's destinations, or the 503 of a retryd
// configured without them.
func (s *server) destinations() (store.Destinations, error) {
	if s.dests == nil || s.keys == nil {
		return nil, errorf(http.StatusServiceUnavailable, CodeUnavailable, "",
			"destinations need a secrets key (--secrets-key-file) and a store that keeps them")
	}
	return s.dests, nil
}

// problems turns a destination's Problems into the API's 400, or passes
// another error through.
func problems(err error) error {
	p, ok := errors.AsType[destination.Problems](err)
	if !ok {
		return err
	}
	out := make([]FieldProblem, len(p))
	for i, fe := range p {
		out[i] = FieldProblem{Field: fe.Field, Message: fe.Message}
	}
	return fieldsError(out)
}

// checkDestination validates d, opening a copy of its sealed secrets
// (those a change kept) so that what depends on them is checked too.
func (s *server) checkDestination(d *destination.Destination, tenant string) error {
	open := d.Clone()
	if err := open.Open(s.keys, tenant); err != nil {
		return err
	}
	return problems(open.Validate(s.destBounds))
}

// withSigningSecret gives d a new signing secret when it signs without
// one, and returns it in the clear (to answer once), or "".
func withSigningSecret(d *destination.Destination) (string, error) {
	if d.Signing == nil || !d.Signing.Secret.IsZero() {
		return "", nil
	}
	secret, err := signing.NewSecret()
	if err != nil {
		return "", err
	}
	d.Signing.Secret = destination.NewSecret(secret)
	return secret, nil
}

func (s *server) destinationCreate(w http.ResponseWriter, r *http.Request, tenant string) error {
	st, err := s.destinations()
	if err != nil {
		return err
	}
	data, err := s.readBody(w, r, s.maxBody)
	if err != nil {
		return err
	}
	d, err := destination.ParseRequest(data)
	if err != nil {
		return problems(err)
	}
	if err := problems(d.Validate(s.destBounds)); err != nil {
		return err
	}
	digest, err := d.Digest(s.keys.HMAC)
	if err != nil {
		return err
	}
	secret, err := withSigningSecret(d)
	if err != nil {
		return err
	}
	now := s.now()
	d.StatusSince = now.UnixMilli() // a destination created paused has been paused since
	if err := d.Seal(s.keys, tenant); err != nil {
		return problems(err)
	}
	spec, err := d.Encode()
	if err != nil {
		return err
	}
	sd, created, err := st.DestinationCreate(r.Context(), &store.Destination{
		Tenant: tenant, ID: d.ID, Spec: spec, RequestHash: digest, CreatedAt: now,
	})
	if errors.Is(err, store.ErrConflict) {
		return errorf(http.StatusConflict, CodeConflict, "destinationId",
			"destination %q exists with other settings; change it with PATCH /destinations/%s", d.ID, d.ID)
	}
	if err != nil {
		return storeError(err, "destination")
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		s.destinationChanged(tenant, d.ID)
	} else {
		secret = "" // answered once, to the create that made it
	}
	return s.writeDestination(w, status, sd, secret)
}

func (s *server) destinationGet(w http.ResponseWriter, r *http.Request, tenant string) error {
	st, err := s.destinations()
	if err != nil {
		return err
	}
	id, err := pathDestination(r)
	if err != nil {
		return err
	}
	sd, err := st.DestinationGet(r.Context(), tenant, id)
	if err != nil {
		return storeError(err, "destination")
	}
	return s.writeDestination(w, http.StatusOK, sd, "")
}

func (s *server) destinationList(w http.ResponseWriter, r *http.Request, tenant string) error {
	st, err := s.destinations()
	if err != nil {
		return err
	}
	q, err := parseQuery(r, "pageToken", "limit")
	if err != nil {
		return err
	}
	items, next, err := st.DestinationList(r.Context(), tenant, q.page)
	if err != nil {
		return listError(err, q)
	}
	out := make([]json.RawMessage, 0, len(items))
	for _, sd := range items {
		b, err := destinationJSON(sd, "")
		if err != nil {
			return err
		}
		out = append(out, b)
	}
	s.writeJSON(w, http.StatusOK, list[json.RawMessage]{out, next})
	return nil
}

// destinationPatch applies a JSON merge patch. A "version" member makes
// it conditional: 409 unless the destination is at that version.
func (s *server) destinationPatch(w http.ResponseWriter, r *http.Request, tenant string) error {
	st, err := s.destinations()
	if err != nil {
		return err
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || (mt != "application/json" && mt != "application/merge-patch+json") {
			return errorf(http.StatusUnsupportedMediaType, CodeUnsupportedMedia, "",
				"want Content-Type application/merge-patch+json or application/json, got %q", ct)
		}
	}
	r.Header.Del("Content-Type") // checked: readBody would want application/json
	data, err := s.readBody(w, r, s.maxBody)
	if err != nil {
		return err
	}
	m, err := parseObject(data)
	if err != nil {
		return err
	}
	var want int64
	if raw, ok := m["version"]; ok {
		if err := json.Unmarshal(raw, &want); err != nil || want < 1 {
			return invalid("version", "must be the version the change is made from, a positive integer")
		}
	}
	for _, k := range []string{"version", "createdAt", "updatedAt", "statusSince", "failingSince"} {
		delete(m, k) // what answers show and retryd keeps: an answer sent back as a patch changes none of it
	}
	patch, err := json.Marshal(m)
	if err != nil {
		return err
	}
	id, err := pathDestination(r)
	if err != nil {
		return err
	}
	var secret string
	now := s.now()
	_, sd, err := destination.Update(r.Context(), st, tenant, id, now, func(old *destination.Destination) (bool, error) {
		d, err := destination.Patch(old, patch)
		if err != nil {
			return false, problems(err)
		}
		if d.Status != old.Status {
			// A new status comes with its own reason, or none: the old
			// one was the old status's.
			reason := ""
			if _, given := m["statusReason"]; given {
				reason = d.StatusReason
			}
			status := d.Status
			d.Status = old.Status
			d.SetStatus(status, reason, now)
		}
		if secret, err = withSigningSecret(d); err != nil {
			return false, err
		}
		if err := s.checkDestination(d, tenant); err != nil {
			return false, err
		}
		if err := d.Seal(s.keys, tenant); err != nil {
			return false, problems(err)
		}
		*old = *d
		return true, nil
	}, want)
	if err != nil {
		return s.destinationError(err)
	}
	s.destinationChanged(tenant, id)
	return s.writeDestination(w, http.StatusOK, sd, secret)
}

// destinationError maps the error of a change of a destination.
func (s *server) destinationError(err error) error {
	if _, ok := errors.AsType[*APIError](err); ok {
		return err
	}
	if errors.Is(err, secrets.ErrNoKey) || errors.Is(err, secrets.ErrCorrupt) {
		// Trying again cannot help: the operator's keys do not open what
		// the store holds.
		return &APIError{Status: http.StatusInternalServerError, Code: CodeInternal,
			Message: "a stored secret of the destination does not open with this retryd's secrets keys", cause: err}
	}
	if errors.Is(err, store.ErrConflict) {
		return errorf(http.StatusConflict, CodeConflict, "version",
			"the destination changed since that version; read it again and repeat the change")
	}
	return storeError(err, "destination")
}

func (s *server) destinationDelete(w http.ResponseWriter, r *http.Request, tenant string) error {
	st, err := s.destinations()
	if err != nil {
		return err
	}
	id, err := pathDestination(r)
	if err != nil {
		return err
	}
	if _, err := st.DestinationGet(r.Context(), tenant, id); err != nil {
		return storeError(err, "destination")
	}
	live, err := s.hasLiveTasks(r, tenant, id)
	if err != nil {
		return storeError(err, "task")
	}
	if live {
		return errorf(http.StatusConflict, CodeConflict, "destinationId",
			"live tasks (PENDING or IN_FLIGHT) name destination %q; cancel them or let them end first", id)
	}
	if err := st.DestinationDelete(r.Context(), tenant, id, 0); err != nil {
		return storeError(err, "destination")
	}
	s.destinationChanged(tenant, id)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// hasLiveTasks reports whether a PENDING or IN_FLIGHT task of tenant
// names destination id. A store may answer a filtered page empty with a
// next token (see store.Store.TaskList): it walks on until a task or the
// end.
func (s *server) hasLiveTasks(r *http.Request, tenant, id string) (bool, error) {
	f := store.TaskFilter{Tenant: tenant, Statuses: []store.Status{store.Pending, store.InFlight}, TargetHost: destination.HostOf(id)}
	page := store.Page{Limit: 1}
	for {
		items, next, err := s.store.TaskList(r.Context(), f, page)
		if err != nil || len(items) > 0 || next == "" {
			return len(items) > 0, err
		}
		page.Token = next
	}
}

// destinationStatus is POST /destinations/{id}/pause and /resume: an
// optional {"reason": "..."} says why.
func (s *server) destinationStatus(status destination.Status) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, tenant string) error {
		st, err := s.destinations()
		if err != nil {
			return err
		}
		var body struct {
			Reason string `json:"reason"`
		}
		if err := s.optionalBody(w, r, &body); err != nil {
			return err
		}
		if len(body.Reason) > destination.MaxReasonLength {
			return invalid("reason", "must be at most %d bytes", destination.MaxReasonLength)
		}
		id, err := pathDestination(r)
		if err != nil {
			return err
		}
		now := s.now()
		_, sd, err := destination.Update(r.Context(), st, tenant, id, now, func(d *destination.Destination) (bool, error) {
			return d.SetStatus(status, body.Reason, now), nil
		}, 0)
		if err != nil {
			return s.destinationError(err)
		}
		s.destinationChanged(tenant, id)
		return s.writeDestination(w, http.StatusOK, sd, "")
	}
}

// destinationRotate is POST /destinations/{id}/signing-secret/rotate: a
// new signing secret, answered once; the old one signs beside it for
// overlapMs (DefaultSigningOverlap when absent).
func (s *server) destinationRotate(w http.ResponseWriter, r *http.Request, tenant string) error {
	st, err := s.destinations()
	if err != nil {
		return err
	}
	body := struct {
		OverlapMs *int64 `json:"overlapMs"`
	}{}
	if err := s.optionalBody(w, r, &body); err != nil {
		return err
	}
	overlap := destination.DefaultSigningOverlap
	if body.OverlapMs != nil {
		if *body.OverlapMs < 0 || *body.OverlapMs > (30*24*time.Hour).Milliseconds() {
			return invalid("overlapMs", "must be 0 to %d (30 days)", (30 * 24 * time.Hour).Milliseconds())
		}
		overlap = time.Duration(*body.OverlapMs) * time.Millisecond
	}
	id, err := pathDestination(r)
	if err != nil {
		return err
	}
	secret, err := signing.NewSecret()
	if err != nil {
		return err
	}
	now := s.now()
	_, sd, err := destination.Update(r.Context(), st, tenant, id, now, func(d *destination.Destination) (bool, error) {
		if d.Signing == nil {
			return false, invalid("signing", "the destination does not sign; give it signing with PATCH first")
		}
		if err := d.RotateSigning(s.keys, tenant, secret, now, overlap); err != nil {
			return false, err
		}
		return true, nil
	}, 0)
	if err != nil {
		return s.destinationError(err)
	}
	s.destinationChanged(tenant, id)
	return s.writeDestination(w, http.StatusOK, sd, secret)
}

// optionalBody decodes a small optional JSON body into v: none, or one
// strict object of v's fields.
func (s *server) optionalBody(w http.ResponseWriter, r *http.Request, v any) error {
	data, err := s.readBody(w, r, 64<<10)
	if err != nil {
		return err
	}
	if len(data) == 0 {
		return nil
	}
	if _, err := parseObject(data); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalid("", "%s", err.Error())
	}
	return nil
}

func (s *server) destinationChanged(tenant, id string) {
	if s.destChanged != nil {
		s.destChanged(tenant, id)
	}
}

func (s *server) writeDestination(w http.ResponseWriter, status int, sd *store.Destination, secret string) error {
	b, err := destinationJSON(sd, secret)
	if err != nil {
		return err
	}
	s.writeJSON(w, status, b)
	return nil
}

// destinationJSON renders a stored destination, secrets masked but for
// secret, a signing secret shown in the clear once, when not "".
func destinationJSON(sd *store.Destination, secret string) (json.RawMessage, error) {
	d, err := destination.Decode(sd.Spec)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(destination.Record{Destination: d, Version: sd.Version,
		CreatedAt: sd.CreatedAt.UnixMilli(), UpdatedAt: sd.UpdatedAt.UnixMilli()})
	if err != nil || secret == "" {
		return b, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	var sg map[string]json.RawMessage
	if err := json.Unmarshal(m["signing"], &sg); err != nil {
		return nil, err
	}
	sg["secret"], _ = json.Marshal(secret)
	m["signing"], _ = json.Marshal(sg)
	return json.Marshal(m)
}

// pathDestination returns the destinationId of r's path: a 404 when it
// cannot name one, as when none has that name.
func pathDestination(r *http.Request) (string, error) {
	id := r.PathValue("destinationId")
	if !destination.ValidID(id) {
		return "", errorf(http.StatusNotFound, CodeNotFound, "", "destination not found")
	}
	return id, nil
}
