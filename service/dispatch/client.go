package dispatch

import (
	"crypto/tls"
	"net"
	"net/http"
	"time"
)

// HTTPClient returns a net/http client for calls retryd makes on a
// tenant's behalf besides attempts (an OAuth2 token endpoint): it dials
// through the same Guard, with the same connect timeout and TLS roots, is
// bounded by the attempt Timeout, and follows no redirect.
func (d *Dispatcher) HTTPClient() *http.Client {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: d.cfg.ConnectTimeout, KeepAlive: 30 * time.Second, Control: d.cfg.Guard.control}).DialContext,
		TLSHandshakeTimeout: d.cfg.ConnectTimeout,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     idleTimeout,
		ForceAttemptHTTP2:   true,
	}
	if d.cfg.TLS != nil {
		tr.TLSClientConfig = d.cfg.TLS.Clone()
	}
	return &http.Client{
		Transport:     tr,
		Timeout:       d.cfg.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// WithTLS returns a Dispatcher configured as d but for TLS, which gives a
// destination its own CA and client certificate, and timeout, when
// longer than zero. It keeps connections of its own; Close it when done.
func (d *Dispatcher) WithTLS(tc *tls.Config, timeout time.Duration) *Dispatcher {
	cfg := d.cfg
	if tc != nil {
		cfg.TLS = tc
	}
	if timeout > 0 {
		cfg.Timeout = timeout
	}
	return New(cfg)
}
