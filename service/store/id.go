package store

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"time"
)

// NewID returns a version 7 UUID (RFC 9562: the Unix time in milliseconds,
// then 74 random bits) in its canonical text form, for task IDs and
// generated idempotency keys. IDs made one after another sort together, so
// a store's index of them grows at one end instead of touching a random
// page for every new task: fewer pages written per commit. It is safe for
// concurrent use.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[6:]) // crypto/rand.Read never fails
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(time.Now().UnixMilli()))
	copy(b[:6], ms[2:])
	b[6] = b[6]&0x0f | 0x70
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:36], b[10:16])
	return string(s[:])
}

// IsID reports whether s is a UUID in canonical text form (hex digits in
// either case, dashes at 8, 13, 18 and 23): the shape of every task ID. Any
// version passes, so IDs made before NewID made version 7 ones still do.
func IsID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}
