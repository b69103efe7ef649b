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
// expires, and one caller fetches the next while the others wait for it,
// each no longer than its own context allows.
type tokenCache struct {
	cfg    clientcredentials.Config
	client *http.Client
	fetch  chan struct{} // held by the one caller fetching a token

	mu  sync.Mutex
	tok *oauth2.Token
	// expires is when the token stops being used: its expiry less a
	// margin for the request to reach the target, taken from when the
	// token endpoint was asked, never when it answered.
	expires time.Time
	gen     uint64 // counts the tokens fetched
	// fresh marks a token fetched after the target refused the one
	// before it, until the target takes it: a refusal of this one is
	// the target's answer, not a stale token.
	fresh bool
	// again is the answer given to the first refusal of generation gen,
	// given alike to the attempts that carried it at the same time.
	again bool
	// failed, until failedUntil, is the token endpoint's last failure:
	// the attempts meanwhile fail with it rather than ask again each.
	failed      error
	failedUntil time.Time
}

func newTokenCache(a *destination.Auth, client *http.Client) *tokenCache {
	cfg := clientcredentials.Config{
		ClientID: a.ClientID, ClientSecret: a.ClientSecret.Plain(), TokenURL: a.TokenURL, Scopes: a.Scopes,
	}
	if a.Audience != "" {
		cfg.EndpointParams = url.Values{"audience": {a.Audience}}
	}
	return &tokenCache{cfg: cfg, client: client, fetch: make(chan struct{}, 1)}
}

// tokenMargin is how long before its expiry a token is replaced: a
// fraction of its life, so that a short-lived token is still used for most
// of it, and never more than ten seconds.
func tokenMargin(life time.Duration) time.Duration {
	return min(max(life/40, 20*time.Millisecond), 10*time.Second)
}

// failureMemory is how long a failure of the token endpoint is answered to
// the attempts that come after it without asking again.
const failureMemory = time.Second

// current returns the token to use at now, if there is one, or the
// endpoint's failure still remembered.
func (c *tokenCache) current(now time.Time) (tok string, gen uint64, ok bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tok != nil && (c.expires.IsZero() || now.Before(c.expires)) {
		return c.tok.AccessToken, c.gen, true, nil
	}
	if c.failed != nil && now.Before(c.failedUntil) {
		return "", 0, true, c.failed
	}
	return "", 0, false, nil
}

// get returns the current token, fetching one when there is none or it is
// about to expire, and its generation.
func (c *tokenCache) get(ctx context.Context, now time.Time) (string, uint64, error) {
	if tok, gen, ok, err := c.current(now); ok {
		return tok, gen, err
	}
	select {
	case c.fetch <- struct{}{}:
	case <-ctx.Done():
		return "", 0, fmt.Errorf("%w: waiting for %s: %w", ErrToken, c.cfg.TokenURL, ctx.Err())
	}
	defer func() { <-c.fetch }()
	if tok, gen, ok, err := c.current(time.Now()); ok {
		return tok, gen, err // fetched, or failed, while this caller waited
	}
	asked := time.Now()
	tok, err := c.cfg.Token(context.WithValue(ctx, oauth2.HTTPClient, c.client))
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.failed, c.failedUntil = fmt.Errorf("%w: %s: %w", ErrToken, c.cfg.TokenURL, err), time.Now().Add(failureMemory)
		return "", 0, c.failed
	}
	c.tok, c.gen, c.failed = tok, c.gen+1, nil
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
// gen. It drops that token and reports whether the attempt should go
// again at once, uncharged: yes for a token that went stale, no for one
// fetched after a refusal (the target refuses the credentials, not the
// token). Every attempt that carried gen gets the first one's answer.
func (c *tokenCache) refused(gen uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case gen < c.gen:
		return true // a newer token came since: the next attempt carries it
	case c.tok == nil:
		return c.again // dropped already, for an attempt of the same token
	}
	c.again = !c.fresh
	c.tok, c.fresh = nil, true
	return c.again
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
