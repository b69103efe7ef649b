// Package secrets encrypts the secrets a destination holds (credentials,
// webhook signing secrets) before a store keeps them, with AES-256-GCM
// under a key only the retryd process has: a copy of the database alone
// does not give them away.
//
// A sealed secret is a text token,
//
//	sec:v1:<key id>:<base64url(nonce | ciphertext | tag)>
//
// that names the key it was sealed with, so that a Keyring holding the
// current key and the keys it replaced opens tokens sealed before a
// rotation, and Reseal moves them to the current key. The key id is the
// first 8 hex digits of the key's SHA-256, which an operator can compute
// from a key file to tell which key it holds:
//
//	base64 -d < key | sha256sum | cut -c1-8
//
// Each token is bound to a context the caller names (its additional data,
// say "tenant/destination/field"), so that a token copied into another
// field, destination or tenant does not open there.
package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strings"
)

// Mask is what a read of a destination shows in place of a secret.
const Mask = "••••"

// KeySize is the length of a key in bytes: AES-256.
const KeySize = 32

// Prefix begins every token Seal returns: what tells a sealed value from
// one in the clear, for IsSealed and for those who look for sealed values
// without a key (a store's reseal walk).
const Prefix = "sec:v1:"

const (
	idLen = 8 // hex digits of the key id
	// The nonce and tag GCM adds to a plaintext (cipher.NewGCMWithRandomNonce).
	overhead = 12 + 16
	// hashInfo names, for HKDF, what the hash key derived from a key is
	// for, so that it is independent of the key's use for encryption.
	hashInfo = "retryd secrets: request hash key v1"
)

// Errors the functions and methods of this package wrap; test for them
// with errors.Is.
var (
	// ErrNoKey: the token was sealed with a key the Keyring does not hold.
	ErrNoKey = errors.New("secrets: the token's key is not in the keyring")
	// ErrCorrupt: the token is malformed, was altered, or was sealed for
	// other additional data.
	ErrCorrupt = errors.New("secrets: token is malformed or does not authenticate")
	// ErrBadKey: a key is not KeySize bytes, or a key file does not hold one.
	ErrBadKey = errors.New("secrets: bad key")
)

// Keyring seals with its current key and opens with any of its keys. Make
// one with NewKeyring, LoadKeyFile or EnsureKeyFile; it never changes once
// made, and is safe for concurrent use.
type Keyring struct {
	current *key
	old     []*key
	hashKey []byte
}

type key struct {
	id     string   // idLen hex digits
	sum    [32]byte // its SHA-256, to tell two keys of one id apart
	header string   // Prefix + id + ":": how the key's tokens begin
	aead   cipher.AEAD
}

// NewKeyring returns a Keyring that seals with current and opens tokens
// sealed with current or any of old, the keys current replaced. Each key
// is KeySize bytes; the Keyring keeps no reference to the slices.
func NewKeyring(current []byte, old ...[]byte) (*Keyring, error) {
	cur, err := newKey(current)
	if err != nil {
		return nil, err
	}
	hk, err := hkdf.Key(sha256.New, current, nil, hashInfo, sha256.Size)
	if err != nil {
		return nil, fmt.Errorf("secrets: deriving the hash key: %w", err)
	}
	kr := &Keyring{current: cur, hashKey: hk}
	for i, b := range old {
		k, err := newKey(b)
		if err != nil {
			return nil, fmt.Errorf("old key %d: %w", i+1, err)
		}
		// Tokens find their key by id, so two keys must not share one.
		// The same key given twice (an operator listing the current
		// key among the old ones) is harmless and skipped.
		if same, clash := kr.clash(k); clash {
			return nil, fmt.Errorf("%w: old key %d has the id %s of another key", ErrBadKey, i+1, k.id)
		} else if same {
			continue
		}
		kr.old = append(kr.old, k)
	}
	return kr, nil
}

func newKey(b []byte) (*key, error) {
	if len(b) != KeySize {
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrBadKey, len(b), KeySize)
	}
	block, err := aes.NewCipher(b)
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	aead, err := cipher.NewGCMWithRandomNonce(block)
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	sum := sha256.Sum256(b)
	id := hex.EncodeToString(sum[:idLen/2])
	return &key{id: id, sum: sum, header: Prefix + id + ":", aead: aead}, nil
}

// clash reports whether a key of k's id is in kr already: the same key
// (same) or another one (clash).
func (kr *Keyring) clash(k *key) (same, clash bool) {
	for _, o := range append([]*key{kr.current}, kr.old...) {
		if o.id == k.id {
			return o.sum == k.sum, o.sum != k.sum
		}
	}
	return false, false
}

// KeyID returns the id of the current key, which its tokens name it by:
// the first 8 hex digits of its SHA-256.
func (kr *Keyring) KeyID() string { return kr.current.id }

// Seal encrypts plaintext with the current key, bound to ad: Open needs
// the same ad. Each call draws a new random nonce, so sealing the same
// secret twice gives two different tokens.
func (kr *Keyring) Seal(plaintext, ad []byte) string {
	k := kr.current
	ct := k.aead.Seal(nil, nil, plaintext, k.additional(ad))
	return k.header + base64.RawURLEncoding.EncodeToString(ct)
}

// Open decrypts a token Seal returned for the same ad, with whichever of
// the Keyring's keys sealed it. Its error wraps ErrNoKey when the Keyring
// does not hold that key, and ErrCorrupt when the token is malformed,
// altered, or sealed for another ad.
func (kr *Keyring) Open(token string, ad []byte) ([]byte, error) {
	k, ct, err := kr.parse(token)
	if err != nil {
		return nil, err
	}
	plain, err := k.aead.Open(nil, nil, ct, k.additional(ad))
	if err != nil {
		return nil, fmt.Errorf("%w (key %s)", ErrCorrupt, k.id)
	}
	return plain, nil
}

// Reseal opens token and, when an old key sealed it, seals its plaintext
// again with the current key for the same ad: changed is false, and the
// token is returned as it is, when the current key sealed it. Errors are
// Open's; a token that does not open is never returned as resealed.
func (kr *Keyring) Reseal(token string, ad []byte) (resealed string, changed bool, err error) {
	plain, err := kr.Open(token, ad)
	if err != nil {
		return "", false, err
	}
	if strings.HasPrefix(token, kr.current.header) {
		return token, false, nil
	}
	return kr.Seal(plain, ad), true, nil
}

// parse finds token's key and decodes its ciphertext.
func (kr *Keyring) parse(token string) (*key, []byte, error) {
	id, body, ok := split(token)
	if !ok {
		return nil, nil, fmt.Errorf("%w: not a sealed token", ErrCorrupt)
	}
	k := kr.find(id)
	if k == nil {
		return nil, nil, fmt.Errorf("%w: sealed with key %s", ErrNoKey, id)
	}
	// Strict: one ciphertext has one text, so that a token altered in
	// the unused bits of its last character does not open.
	ct, err := base64.RawURLEncoding.Strict().DecodeString(body)
	if err != nil || len(ct) < overhead {
		return nil, nil, fmt.Errorf("%w: bad ciphertext (key %s)", ErrCorrupt, id)
	}
	return k, ct, nil
}

func (kr *Keyring) find(id string) *key {
	if kr.current.id == id {
		return kr.current
	}
	for _, k := range kr.old {
		if k.id == id {
			return k
		}
	}
	return nil
}

// additional is the GCM additional data of a token: the caller's ad after
// the token's header, so that the version and key id are authenticated
// too. The header has a fixed length, so the two cannot run into each
// other.
func (k *key) additional(ad []byte) []byte {
	b := make([]byte, 0, len(k.header)+len(ad))
	return append(append(b, k.header...), ad...)
}

// split cuts a token into its key id and its base64 text, checking only
// their syntax.
func split(s string) (id, body string, ok bool) {
	rest, ok := strings.CutPrefix(s, Prefix)
	if !ok || len(rest) < idLen+1 || rest[idLen] != ':' {
		return "", "", false
	}
	id, body = rest[:idLen], rest[idLen+1:]
	for i := range len(id) {
		if c := id[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "", "", false
		}
	}
	if len(body) < base64.RawURLEncoding.EncodedLen(overhead) {
		return "", "", false
	}
	return id, body, true
}

// IsSealed reports whether s has the form of a token Seal returns. It
// does not tell whether any key opens it.
func IsSealed(s string) bool {
	_, body, ok := split(s)
	if !ok {
		return false
	}
	for i := range len(body) {
		c := body[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// HMAC returns the HMAC-SHA256 of data under the Keyring's hash key, for
// digests of requests that carry secrets (the request hash that tells an
// idempotent repeat from a conflicting request): unlike a plain SHA-256,
// a stored digest cannot be tried against guessed secrets without the key.
//
// The hash key is derived (HKDF-SHA256) from the current key, so a
// rotation changes every digest: a request repeated after a rotation no
// longer matches the digest stored before it, and is taken for a
// conflicting one.
func (kr *Keyring) HMAC(data []byte) []byte {
	h := kr.NewHMAC()
	h.Write(data)
	return h.Sum(nil)
}

// NewHMAC returns a hash.Hash that computes what HMAC does, for data
// written in parts.
func (kr *Keyring) NewHMAC() hash.Hash {
	return hmac.New(sha256.New, kr.hashKey)
}
