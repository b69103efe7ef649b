// Package signing signs webhooks as Standard Webhooks has it
// (https://www.standardwebhooks.com): an HMAC-SHA256, under a secret the
// sender and the receiver share, of
//
//	msg_id.timestamp.body
//
// sent as three headers: webhook-id (the message's ID, the same on each
// retry, which receivers dedupe by), webhook-timestamp (the attempt's time
// in unix seconds, which receivers check to refuse replays) and
// webhook-signature ("v1,<base64 of the HMAC>", one for each secret,
// separated by spaces, so that a receiver holding either the old or the
// new secret accepts the message while a secret is being rotated).
//
// Secrets are written "whsec_" and their standard base64.
package signing

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The headers of a signed message, as the specification writes them.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix begins a secret as it is written.
const SecretPrefix = "whsec_"

// The lengths in bytes a secret may have, as the specification bounds them.
const (
	MinSecretSize = 24
	MaxSecretSize = 64
)

// DefaultTolerance is how far from the receiver's clock Verify accepts a
// message's timestamp when it is given no tolerance.
const DefaultTolerance = 5 * time.Minute

// secretSize is the length of the secrets NewSecret makes.
const secretSize = 32

// Errors the functions of this package wrap; test for them with errors.Is.
var (
	// ErrBadSecret: a secret is not "whsec_" and the base64 of
	// MinSecretSize to MaxSecretSize bytes, or is empty.
	ErrBadSecret = errors.New("signing: bad secret")
	// ErrNoSecret: there is no secret to sign with.
	ErrNoSecret = errors.New("signing: no secret")
	// ErrBadID: a message ID that is empty or holds white space or a
	// control character, which a header cannot carry. A '.' is allowed,
	// as the reference libraries allow it: the timestamp that follows the
	// ID in the signed text is checked by receivers, so an ID and a
	// timestamp cannot be shifted into each other and still pass.
	ErrBadID = errors.New("signing: bad message ID")
	// ErrHeaders: a header Verify needs is missing or malformed.
	ErrHeaders = errors.New("signing: missing or malformed webhook headers")
	// ErrTimestamp: the message's timestamp is further from now than the
	// tolerance.
	ErrTimestamp = errors.New("signing: timestamp outside the tolerance")
	// ErrNoMatch: no signature of the message matches any secret.
	ErrNoMatch = errors.New("signing: no matching signature")
)

// NewSecret returns a new random secret: "whsec_" and the standard base64
// of 32 random bytes.
func NewSecret() (string, error) {
	b := make([]byte, secretSize)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("signing: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b), nil
}

// ParseSecret returns the bytes of a secret written "whsec_" and their
// standard base64, which must be MinSecretSize to MaxSecretSize bytes.
func ParseSecret(s string) ([]byte, error) {
	enc, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return nil, fmt.Errorf("%w: it does not begin %q", ErrBadSecret, SecretPrefix)
	}
	b, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return nil, fmt.Errorf("%w: after %q it is not base64", ErrBadSecret, SecretPrefix)
	}
	if len(b) < MinSecretSize || len(b) > MaxSecretSize {
		return nil, fmt.Errorf("%w: %d bytes, want %d to %d", ErrBadSecret, len(b), MinSecretSize, MaxSecretSize)
	}
	return b, nil
}

// Sign returns the webhook-signature of a message: "v1," and the base64
// of its HMAC-SHA256 under each of secrets, in their order, separated by
// spaces. It reads body to its end once, whatever the number of secrets,
// through a fixed buffer: a body of any size signs in bounded memory.
//
// The timestamp signed is ts in whole unix seconds, as webhook-timestamp
// carries it.
func Sign(secrets [][]byte, msgID string, ts time.Time, body io.Reader) (string, error) {
	macs, scratch, err := start(secrets, msgID, ts)
	if err != nil {
		return "", err
	}
	var w io.Writer = macs[0]
	if len(macs) > 1 {
		ws := make([]io.Writer, len(macs))
		for i, m := range macs {
			ws[i] = m
		}
		w = io.MultiWriter(ws...)
	}
	if _, err := io.Copy(w, body); err != nil {
		return "", fmt.Errorf("signing: reading the body: %w", err)
	}
	return finish(macs, scratch), nil
}

// SignBytes is Sign for a body held in memory.
func SignBytes(secrets [][]byte, msgID string, ts time.Time, body []byte) (string, error) {
	macs, scratch, err := start(secrets, msgID, ts)
	if err != nil {
		return "", err
	}
	for _, m := range macs {
		m.Write(body)
	}
	return finish(macs, scratch), nil
}

// Headers returns the three headers of a message signed with secrets
// (see Sign): webhook-id, webhook-timestamp and webhook-signature.
func Headers(secrets [][]byte, msgID string, ts time.Time, body []byte) (http.Header, error) {
	sig, err := SignBytes(secrets, msgID, ts, body)
	if err != nil {
		return nil, err
	}
	h := make(http.Header, 3)
	h.Set(HeaderID, msgID)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderSignature, sig)
	return h, nil
}

// start returns an HMAC for each secret, each fed "msg_id.timestamp.",
// and a scratch buffer for finish.
func start(secrets [][]byte, msgID string, ts time.Time) ([]hash.Hash, []byte, error) {
	if len(secrets) == 0 {
		return nil, nil, ErrNoSecret
	}
	if err := checkID(msgID); err != nil {
		return nil, nil, err
	}
	// One buffer holds the head here and each HMAC's sum in finish: the
	// hashes are interfaces, so whatever they are given is on the heap.
	head := make([]byte, 0, max(len(msgID)+len(".-9223372036854775808."), sha256.Size))
	head = append(head, msgID...)
	head = append(head, '.')
	head = strconv.AppendInt(head, ts.Unix(), 10)
	head = append(head, '.')
	macs := make([]hash.Hash, len(secrets))
	for i, s := range secrets {
		if len(s) == 0 {
			return nil, nil, fmt.Errorf("%w: secret %d is empty", ErrBadSecret, i+1)
		}
		macs[i] = hmac.New(sha256.New, s)
		macs[i].Write(head)
	}
	return macs, head[:0], nil
}

// sigLen is the length of the base64 of an HMAC-SHA256.
const sigLen = 44

// finish returns the signatures of macs as webhook-signature lists them.
func finish(macs []hash.Hash, scratch []byte) string {
	var b strings.Builder
	b.Grow(len(macs)*len("v1,") + len(macs)*sigLen + len(macs) - 1)
	var enc [sigLen]byte
	for i, m := range macs {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("v1,")
		base64.StdEncoding.Encode(enc[:], m.Sum(scratch[:0]))
		b.Write(enc[:])
	}
	return b.String()
}

// checkID returns an error wrapping ErrBadID when id cannot be signed.
func checkID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty", ErrBadID)
	}
	for i := range len(id) {
		if c := id[i]; c <= ' ' || c == 0x7f {
			return fmt.Errorf("%w: %q holds %q", ErrBadID, id, c)
		}
	}
	return nil
}

// Verify checks a message a receiver got: h holds its headers, body its
// body, secrets the secrets the receiver trusts. It accepts the message
// when its timestamp is within tolerance of now (DefaultTolerance when
// tolerance is not positive) and any of its v1 signatures is the HMAC of
// the message under any of secrets, compared in constant time. Its error
// wraps ErrHeaders, ErrTimestamp or ErrNoMatch (or ErrNoSecret or
// ErrBadSecret, for secrets it cannot use).
//
// Verify does not dedupe: a receiver remembers the webhook-id of the
// messages it accepted, for at least the tolerance, to refuse a replay.
func Verify(secrets [][]byte, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	id, stamp, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || stamp == "" || sigs == "" {
		return fmt.Errorf("%w: want %s, %s and %s", ErrHeaders, HeaderID, HeaderTimestamp, HeaderSignature)
	}
	if err := checkID(id); err != nil {
		return fmt.Errorf("%w: %w", ErrHeaders, err)
	}
	sec, err := strconv.ParseInt(stamp, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s %q is not unix seconds", ErrHeaders, HeaderTimestamp, stamp)
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	ts := time.Unix(sec, 0)
	if d := now.Sub(ts); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: %s is %v from now", ErrTimestamp, HeaderTimestamp, d.Round(time.Second))
	}
	macs, _, err := start(secrets, id, ts)
	if err != nil {
		return err
	}
	want := make([][]byte, len(macs))
	for i, m := range macs {
		m.Write(body)
		want[i] = m.Sum(nil)
	}
	var got [sigLen * 3 / 4]byte
	for sig := range strings.FieldsSeq(sigs) {
		b64, ok := strings.CutPrefix(sig, "v1,")
		if !ok || len(b64) != sigLen {
			continue // another scheme's signature, or not one
		}
		if n, err := base64.StdEncoding.Decode(got[:], []byte(b64)); err != nil || n != sha256.Size {
			continue
		}
		for _, w := range want {
			if hmac.Equal(got[:sha256.Size], w) {
				return nil
			}
		}
	}
	return ErrNoMatch
}
