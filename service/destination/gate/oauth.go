package gate

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/retrykit/retry/service/destination"
)

// ErrToken is wrapped by the error of an attempt whose OAuth2 token could
// not be had: the token endpoint failed, and nothing was sent.
var ErrToken = errors.New("oauth2 token")

// tokenCache keeps one OAuth2 client-credentials token of a destination for
// the whole instance: every task's attempt uses it until shortly before it
// expires, and one caller fetches the next while the others wait for it.
type tokenCache struct {
	cfg    clientcredentials.Config
	client *http.Client

	mu  sync.Mutex
	tok *oauth2.Token
	// expires is when the token stops being used: its expiry less a
	// margin for the request to reach the target, taken from when the
	// token endpoint was asked, never when it answered.
	expires time.Time
	gen     uint64 // counts the tokens fetched
	// fresh marks a token fetched because the target refused the one
	// before it: a refusal of this one is the target's answer, not a
	// stale token.
	fresh bool
}

func newTokenCache(a *destination.Auth, client *http.Client) *tokenCache {
	cfg := clientcredentials.Config{
		ClientID: a.ClientID, ClientSecret: a.ClientSecret.Plain(), TokenURL: a.TokenURL, Scopes: a.Scopes,
	}
	if a.Audience != "" {
		cfg.EndpointParams = url.Values{"audience": {a.Audience}}
	}
	return &tokenCache{cfg: cfg, client: client}
}

// tokenMargin is how long before its expiry a token is replaced: a
// fraction of its life, so that a short-lived token is still used for most
// of it, and never more than ten seconds.
func tokenMargin(life time.Duration) time.Duration {
	return min(max(life/40, 20*time.Millisecond), 10*time.Second)
}

// get returns the current token, fetching one when there is none or it is
// about to expire, and its generation.
func (c *tokenCache) get(ctx context.Context, now time.Time) (string, uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tok != nil && (c.expires.IsZero() || now.Before(c.expires)) {
		return c.tok.AccessToken, c.gen, nil
	}
	asked := time.Now()
	tok, err := c.cfg.Token(context.WithValue(ctx, oauth2.HTTPClient, c.client))
	if err != nil {
		return "", 0, fmt.Errorf("%w: %s: %w", ErrToken, c.cfg.TokenURL, err)
	}
	c.tok, c.gen = tok, c.gen+1
	c.expires = time.Time{}
	if !tok.Expiry.IsZero() {
		// The token lives from when it was asked for at the latest: an
		// expiry computed on its answer's arrival would run late.
		life := tok.Expiry.Sub(time.Now())
		c.expires = asked.Add(life - tokenMargin(life))
	}
	return tok.AccessToken, c.gen, nil
}

// refused is told that the target answered 401 to the token of generation
// gen. It drops that token if it is still the current one and reports
// whether the attempt should go again at once, uncharged: yes unless the
// token was itself fetched after a refusal.
func (c *tokenCache) refused(gen uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen || c.tok == nil {
		return true // already replaced: the next attempt has a newer token
	}
	again := !c.fresh
	c.tok, c.fresh = nil, again
	return again
}

// accepted is told that the target took the token of generation gen: it
// is no longer one fetched after a refusal.
func (c *tokenCache) accepted(gen uint64) {
	c.mu.Lock()
	if gen == c.gen {
		c.fresh = false
	}
	c.mu.Unlock()
}
