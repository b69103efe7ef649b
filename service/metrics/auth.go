package metrics

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
)

// MinTokenLength is the shortest metrics token NewTokens accepts, in bytes
// (as the API's tokens).
const MinTokenLength = 16

// Tokens are the bearer tokens that may read the metrics: credentials of
// their own, for Prometheus, apart from the tenants' tokens of the API. A
// tenant's token reads another tenant's policy names and counts on
// /metrics, so it must not open it. Tokens is immutable and safe for
// concurrent use; a check compares digests in constant time and looks at
// every token, so the time it takes says nothing of which token, or how
// much of one, matched.
type Tokens struct {
	digests [][sha256.Size]byte
}

// NewTokens builds Tokens from tokens, each at least MinTokenLength bytes
// of visible ASCII. Several tokens let one be rotated: the old and the new
// are both good until the old is removed. None is an error.
func NewTokens(tokens []string) (*Tokens, error) {
	if len(tokens) == 0 {
		return nil, errors.New("metrics: no tokens")
	}
	t := &Tokens{}
	for i, tok := range tokens {
		if len(tok) < MinTokenLength {
			return nil, fmt.Errorf("metrics: token %d is shorter than %d bytes", i+1, MinTokenLength)
		}
		for j := 0; j < len(tok); j++ {
			if tok[j] <= ' ' || tok[j] >= 0x7f {
				return nil, fmt.Errorf("metrics: token %d has a byte that is not visible ASCII", i+1)
			}
		}
		t.digests = append(t.digests, sha256.Sum256([]byte(tok)))
	}
	return t, nil
}

// ReadTokens reads a metrics token file: one token per line, nothing else
// on it; blank lines and lines starting with '#' are skipped. It does not
// check the tokens: NewTokens does.
func ReadTokens(r io.Reader) ([]string, error) {
	var tokens []string
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.ContainsAny(line, " \t") {
			return nil, fmt.Errorf("metrics: tokens line %d: want one token, with no spaces", n)
		}
		tokens = append(tokens, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("metrics: reading tokens: %w", err)
	}
	return tokens, nil
}

// ReadTokenFile reads the metrics token file at path (see ReadTokens).
func ReadTokenFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	defer f.Close()
	return ReadTokens(f)
}

// allows reports whether token is one of t's. A nil Tokens allows none.
func (t *Tokens) allows(token string) bool {
	if t == nil {
		return false
	}
	d := sha256.Sum256([]byte(token))
	ok := 0
	for i := range t.digests {
		ok |= subtle.ConstantTimeCompare(d[:], t.digests[i][:])
	}
	return ok == 1
}

// Guard returns h behind a check of the request's "Authorization: Bearer
// TOKEN" against t: a request without one of t's tokens is answered 401
// with a JSON error in the API's shape ({"error": {"code":
// "unauthorized", "message"}}). With t nil, no request passes: closed
// says why, in the 401's message. retryd guards /metrics so.
func Guard(h http.Handler, t *Tokens, closed string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if t == nil {
			unauthorized(w, closed)
			return
		}
		scheme, token, found := strings.Cut(r.Header.Get("Authorization"), " ")
		if !found || !strings.EqualFold(scheme, "Bearer") {
			unauthorized(w, "want an Authorization: Bearer token, a metrics token (not a tenant's)")
			return
		}
		if !t.allows(strings.TrimSpace(token)) {
			unauthorized(w, "not a metrics token")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// unauthorized answers 401 as the API does.
func unauthorized(w http.ResponseWriter, message string) {
	b, _ := json.Marshal(map[string]map[string]string{"error": {"code": "unauthorized", "message": message}})
	w.Header().Set("WWW-Authenticate", `Bearer realm="retryd metrics"`)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write(append(b, '\n'))
}
