package api

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
)

// MinTokenLength is the shortest bearer token a Tokens accepts, in bytes.
const MinTokenLength = 16

// Tokens maps bearer tokens to tenants. It is immutable once built and safe
// for concurrent use. Lookups compare digests in constant time and always
// look at every entry, so the time taken says nothing about which token
// (or how much of one) matched.
type Tokens struct {
	entries []tokenEntry
	// bodyRefs lists, per tenant, the prefixes its bodyRefs may lie under
	// (the tokens file's s3:// fields); a tenant without any may give none.
	bodyRefs map[string][]string
}

type tokenEntry struct {
	digest [sha256.Size]byte
	tenant string
}

// NewTokens builds a Tokens from token → tenant. Each token must be at least
// MinTokenLength bytes of visible ASCII and each tenant a valid name
// (letters, digits, '.', '_', '-'; 1 to 64 of them). An empty map is an
// error: to turn authentication off, pass no Tokens at all.
func NewTokens(tokenTenant map[string]string) (*Tokens, error) {
	if len(tokenTenant) == 0 {
		return nil, errors.New("api: no tokens")
	}
	t := &Tokens{}
	for token, tenant := range tokenTenant {
		if err := checkToken(token, tenant); err != nil {
			return nil, err
		}
		t.entries = append(t.entries, tokenEntry{sha256.Sum256([]byte(token)), tenant})
	}
	return t, nil
}

func checkToken(token, tenant string) error {
	if len(token) < MinTokenLength {
		return fmt.Errorf("api: a token of tenant %q is shorter than %d bytes", tenant, MinTokenLength)
	}
	for i := 0; i < len(token); i++ {
		if token[i] <= ' ' || token[i] >= 0x7f {
			return fmt.Errorf("api: a token of tenant %q has a byte that is not visible ASCII", tenant)
		}
	}
	if !validName(tenant, 64) {
		return fmt.Errorf("api: tenant %q: want 1 to 64 letters, digits, '.', '_' or '-'", tenant)
	}
	return nil
}

// ParseTokens reads a tokens file: one "TOKEN TENANT [BODYREF_PREFIX…]" line
// per token, its fields separated by spaces or tabs; blank lines and lines
// starting with '#' are skipped. A tenant may have several tokens (to rotate
// them); a token may appear only once.
//
// The fields after the tenant, none by default, are the places the tenant's
// tasks may name as their bodyRef: prefixes s3://bucket/ or
// s3://bucket/some/prefix/, each ending with '/' (so that s3://b/a/ does not
// also allow s3://b/ab/; see ParseBodyRefPrefix). retryd reads such a body
// with its own credentials and sends it to a target the tenant chooses, so
// a tenant may name only what it is allowed to read. A tenant's prefixes are
// those of all its lines together:
//
//	# token                      tenant  bodyRef prefixes (optional)
//	3f1c…e9a0                    acme    s3://acme-payloads/retry/ s3://shared/acme/
//	77b2…01cd                    globex
func ParseTokens(r io.Reader) (*Tokens, error) {
	m := map[string]string{}
	refs := map[string][]string{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			return nil, fmt.Errorf("api: tokens line %d: want \"TOKEN TENANT [s3://bucket/prefix/…]\", got %d field(s)", n, len(f))
		}
		if _, dup := m[f[0]]; dup {
			return nil, fmt.Errorf("api: tokens line %d: token repeated", n)
		}
		if err := checkToken(f[0], f[1]); err != nil {
			return nil, fmt.Errorf("tokens line %d: %w", n, err)
		}
		m[f[0]] = f[1]
		for _, p := range f[2:] {
			if err := ParseBodyRefPrefix(p); err != nil {
				return nil, fmt.Errorf("api: tokens line %d: %w", n, err)
			}
			if !slices.Contains(refs[f[1]], p) {
				refs[f[1]] = append(refs[f[1]], p)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("api: reading tokens: %w", err)
	}
	t, err := NewTokens(m)
	if err != nil {
		return nil, err
	}
	if len(refs) > 0 {
		t.bodyRefs = refs
	}
	return t, nil
}

// BodyRefPrefixes returns the prefixes under which tenant's bodyRefs may
// lie, from the tokens file; none for a tenant the file gives none, and for
// a nil Tokens.
func (t *Tokens) BodyRefPrefixes(tenant string) []string {
	if t == nil {
		return nil
	}
	return slices.Clone(t.bodyRefs[tenant])
}

// HasBodyRefs reports whether any tenant may give a bodyRef.
func (t *Tokens) HasBodyRefs() bool { return t != nil && len(t.bodyRefs) > 0 }

// LoadTokens reads the tokens file at path (see ParseTokens); retryd's
// --tokens-file.
func LoadTokens(path string) (*Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	defer f.Close()
	return ParseTokens(f)
}

// Tenant returns the tenant that owns token, and whether there is one. A nil
// Tokens knows no token.
func (t *Tokens) Tenant(token string) (tenant string, ok bool) {
	if t == nil {
		return "", false
	}
	d := sha256.Sum256([]byte(token))
	for _, e := range t.entries {
		if subtle.ConstantTimeCompare(d[:], e.digest[:]) == 1 {
			tenant, ok = e.tenant, true
		}
	}
	return tenant, ok
}

// Len returns the number of tokens; 0 for a nil Tokens.
func (t *Tokens) Len() int {
	if t == nil {
		return 0
	}
	return len(t.entries)
}

// SessionCookie is the cookie in which the web console keeps its bearer
// token; the API takes it in place of an Authorization header.
const SessionCookie = "retryd_session"

// authenticate returns the tenant a request acts for: the Authorization
// header's bearer token's, or else the SessionCookie's.
func (s *server) authenticate(r *http.Request) (string, error) {
	if s.tokens == nil {
		return DefaultTenant, nil
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		// The console's pages carry their token in a cookie no script can
		// read (package console); cross-origin protection in front of the
		// server keeps other sites from riding on it.
		if c, err := r.Cookie(SessionCookie); err == nil {
			h = "Bearer " + c.Value
		}
	}
	scheme, token, found := strings.Cut(h, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", errorf(http.StatusUnauthorized, CodeUnauthorized, "", "want an Authorization: Bearer token")
	}
	tenant, ok := s.tokens.Tenant(strings.TrimSpace(token))
	if !ok {
		return "", errorf(http.StatusUnauthorized, CodeUnauthorized, "", "unknown bearer token")
	}
	return tenant, nil
}
