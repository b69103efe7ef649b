package gate

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrykit/retry/service/destination"
	"github.com/retrykit/retry/service/destination/signing"
	"github.com/retrykit/retry/service/dispatch"
	"github.com/retrykit/retry/service/store"
)

// entry is the cache of one destination: its view as last read, replaced
// whole when the destination's version moves on.
type entry struct {
	mu      sync.Mutex
	fetched time.Time // when the store was last asked; zero: ask again
	cur     *view
	err     error // why the destination could not be used, as last read
	// writing is set while a write of the destination's failures is on
	// its way, so that a burst of attempts makes one.
	writing atomic.Bool
}

func (e *entry) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cur != nil {
		e.cur.retire()
	}
}

// view is one version of a destination, secrets open, with what its
// attempts need made once: headers, signing keys, its own dispatcher, its
// token cache. It is read-only but for what it counts.
type view struct {
	d       *destination.Destination
	version int64
	extra   []dispatch.Header // the destination's headers and static credentials
	keys    [][]byte          // signing secrets, the current first
	until   []int64           // for each of keys[1:], when it stops signing (epoch ms)
	disp    *dispatch.Dispatcher
	own     bool // disp is this view's, to close when retired
	timeout time.Duration
	token   *tokenCache // OAuth2 client credentials; nil for other auth

	// ewma is the mean duration of recent attempts, which spaces the
	// tasks held for room in flight.
	mu   sync.Mutex
	ewma time.Duration
}

// load builds the view of stored destination sd. What the view it
// replaces, old (nil for none), made of the same settings is kept: the
// OAuth2 token of the same credentials, the dispatcher and connections of
// the same TLS settings and timeout, the mean duration. A change of the
// destination's state (a run of failures recorded) costs nothing then.
func (g *Gate) load(tenant string, sd *store.Destination, old *view) (*view, error) {
	d, err := destination.Decode(sd.Spec)
	if err != nil {
		return nil, err
	}
	if err := d.Open(g.cfg.Keys, tenant); err != nil {
		return nil, err
	}
	v := &view{d: d, version: sd.Version, disp: g.cfg.Dispatcher, timeout: time.Duration(d.TimeoutMs) * time.Millisecond}
	for name, val := range d.Headers {
		v.extra = append(v.extra, dispatch.Header{Name: canonical(name), Value: val.Plain()})
	}
	if a := d.Auth; a != nil {
		switch a.Type {
		case destination.AuthBearer:
			v.extra = append(v.extra, dispatch.Header{Name: "Authorization", Value: "Bearer " + a.Token.Plain()})
		case destination.AuthBasic:
			cred := base64.StdEncoding.EncodeToString([]byte(a.Username + ":" + a.Password.Plain()))
			v.extra = append(v.extra, dispatch.Header{Name: "Authorization", Value: "Basic " + cred})
		case destination.AuthHeader:
			v.extra = append(v.extra, dispatch.Header{Name: canonical(a.Name), Value: a.Value.Plain()})
		case destination.AuthOAuth2Client:
			if old != nil && old.token != nil && reflect.DeepEqual(old.d.Auth, a) {
				v.token = old.token
			} else {
				v.token = newTokenCache(a, g.tokens)
			}
		}
	}
	if sg := d.Signing; sg != nil {
		k, err := signing.ParseSecret(sg.Secret.Plain())
		if err != nil {
			return nil, fmt.Errorf("destination %s: signing secret: %w", d.ID, err)
		}
		v.keys = append(v.keys, k)
		for _, p := range sg.Previous {
			k, err := signing.ParseSecret(p.Secret.Plain())
			if err != nil {
				return nil, fmt.Errorf("destination %s: previous signing secret: %w", d.ID, err)
			}
			v.keys, v.until = append(v.keys, k), append(v.until, p.Until)
		}
	}
	if d.TLS != nil || v.timeout > v.disp.Timeout() {
		if old != nil && old.own && reflect.DeepEqual(old.d.TLS, d.TLS) && old.timeout == v.timeout {
			v.disp, v.own, old.own = old.disp, true, false // old no longer closes it
		} else {
			tc, err := tlsConfig(d.TLS)
			if err != nil {
				return nil, fmt.Errorf("destination %s: tls: %w", d.ID, err)
			}
			v.disp, v.own = g.cfg.Dispatcher.WithTLS(tc, v.timeout), true
		}
	}
	if old != nil {
		v.ewma = old.meanDuration()
	}
	return v, nil
}

// retire closes what the view owns; attempts still using it finish.
func (v *view) retire() {
	if v.own {
		v.disp.Close()
	}
}

// signingKeys returns the keys that sign at now: the current one, and the
// previous ones whose overlap has not ended.
func (v *view) signingKeys(now time.Time) [][]byte {
	if len(v.until) == 0 {
		return v.keys
	}
	out := v.keys[:1:1]
	for i, until := range v.until {
		if now.UnixMilli() < until {
			out = append(out, v.keys[i+1])
		}
	}
	return out
}

// observe folds an attempt's duration into the view's mean.
func (v *view) observe(d time.Duration) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.ewma == 0 {
		v.ewma = d
		return
	}
	v.ewma += (d - v.ewma) / 8
}

func (v *view) meanDuration() time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.ewma
}

// tlsConfig returns the TLS configuration of t: its CA as the only roots
// when given (the system's otherwise), its client certificate when given.
func tlsConfig(t *destination.TLS) (*tls.Config, error) {
	if t == nil {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.CACertPEM != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(t.CACertPEM)) {
			return nil, fmt.Errorf("caCertPem holds no certificate")
		}
		tc.RootCAs = pool
	}
	if t.ClientCertPEM != "" {
		pair, err := tls.X509KeyPair([]byte(t.ClientCertPEM), []byte(t.ClientKeyPEM.Plain()))
		if err != nil {
			return nil, err
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}
