package store

import (
	"crypto/rand"
	"encoding/binary"
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
	return FormatID(b)
}

// IsID reports whether s is a UUID in canonical text form (hex digits in
// either case, dashes at 8, 13, 18 and 23): the shape of every task ID. Any
// version passes, so IDs made before NewID made version 7 ones still do.
func IsID(s string) bool {
	_, ok := ParseID(s)
	return ok
}

// ParseID decodes s, a UUID in canonical text form (see IsID), into its 16
// bytes, without allocating: the scheduler and the tracing of every attempt
// call it.
func ParseID(s string) (u [16]byte, ok bool) {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, false
	}
	for j := range u {
		i := 2*j + dashesBefore(j)
		hi, ok1 := hexDigit(s[i])
		lo, ok2 := hexDigit(s[i+1])
		if !ok1 || !ok2 {
			return u, false
		}
		u[j] = hi<<4 | lo
	}
	return u, true
}

// FormatID is the canonical text form of the UUID u, in lower case.
func FormatID(u [16]byte) string {
	const digits = "0123456789abcdef"
	var s [36]byte
	for _, i := range [...]int{8, 13, 18, 23} {
		s[i] = '-'
	}
	for j, b := range u {
		i := 2*j + dashesBefore(j)
		s[i], s[i+1] = digits[b>>4], digits[b&0xf]
	}
	return string(s[:])
}

// dashesBefore is how many dashes the text form has before byte j's digits
// (8-4-4-4-12).
func dashesBefore(j int) int {
	switch {
	case j >= 10:
		return 4
	case j >= 8:
		return 3
	case j >= 6:
		return 2
	case j >= 4:
		return 1
	}
	return 0
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
