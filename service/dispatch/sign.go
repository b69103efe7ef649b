package dispatch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
)

// ErrSign is wrapped by the error of an attempt whose signature could not
// be made (Request.Sign failed): nothing was sent.
var ErrSign = errors.New("signing the request")

// sign runs r.Sign over r's body: the inline bytes, or the blob the body
// refers to, read once here and opened again to send.
func (d *Dispatcher) sign(ctx context.Context, r *Request) ([]Header, error) {
	if r.BodyRef == "" {
		h, err := r.Sign(bytes.NewReader(r.Body))
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrSign, err)
		}
		return h, nil
	}
	if d.cfg.Blobs == nil {
		return nil, &bodyError{ref: r.BodyRef, err: ErrNoBlobStore}
	}
	body, _, err := d.cfg.Blobs.Open(ctx, r.BodyRef)
	if err != nil {
		return nil, &bodyError{ref: r.BodyRef, err: err}
	}
	defer body.Close()
	h, err := r.Sign(body)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSign, err)
	}
	return h, nil
}

// overridden reports whether the canonical header k is among hs, which
// take its place.
func overridden(k string, hs []Header) bool {
	for _, h := range hs {
		if h.Name == k {
			return true
		}
	}
	return false
}
