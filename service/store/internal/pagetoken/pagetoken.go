// Package pagetoken makes the opaque page tokens of the stores' lists. A
// token names the kind of list it belongs to and the last key of the page
// it ends, so a token is never taken for another list's.
package pagetoken

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"github.com/retrykit/retry/service/store"
)

// Encode returns the token that resumes a list of kind after key. kind must
// not contain ':'.
func Encode(kind, key string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(kind + ":" + key))
}

// Decode returns the key of a token Encode made for kind, or an error
// wrapping store.ErrInvalid.
func Decode(kind, token string) (string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return "", fmt.Errorf("page token: %w", store.ErrInvalid)
	}
	key, ok := strings.CutPrefix(string(raw), kind+":")
	if !ok {
		return "", fmt.Errorf("page token of another list: %w", store.ErrInvalid)
	}
	return key, nil
}

// EncodeInt is Encode for an integer key.
func EncodeInt(kind string, key int64) string {
	return Encode(kind, strconv.FormatInt(key, 10))
}

// DecodeInt is Decode for a token EncodeInt made; the key must be positive.
func DecodeInt(kind, token string) (int64, error) {
	s, err := Decode(kind, token)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("page token key: %w", store.ErrInvalid)
	}
	return n, nil
}
