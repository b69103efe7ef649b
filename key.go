package retry

import (
	"crypto/rand"
	"encoding/hex"
)

// NewIdempotencyKey returns a new random key for the calls of one retried
// request: a version 4 UUID (RFC 9562) from crypto/rand, such as
// "9b2e4f7a-1c3d-4e5f-8a9b-0c1d2e3f4a5b". The transports send the same one
// with every attempt, so a server can tell a retry from a new request.
func NewIdempotencyKey() string {
	var u [16]byte
	_, _ = rand.Read(u[:])  // never fails: crypto/rand.Read crashes the program rather than return an error
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // variant 10
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], u[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], u[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], u[8:10])
	s[23] = '-'
	hex.Encode(s[24:], u[10:])
	return string(s[:])
}
