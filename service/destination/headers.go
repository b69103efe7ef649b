package destination

import (
	"encoding/hex"
	"fmt"
	"maps"
	"net/textproto"
	"slices"
	"strings"

	"github.com/retrykit/retry/service/store"
)

// credentialHeaders are the task headers that carry credentials, sealed at
// rest and masked in answers whatever the operator adds to them.
var credentialHeaders = [...]string{"Authorization", "Proxy-Authorization", "Cookie"}

// SecretHeaderNames returns the canonical names of the task headers to seal:
// the credential headers and extra.
func SecretHeaderNames(extra []string) map[string]bool {
	out := make(map[string]bool, len(credentialHeaders)+len(extra))
	for _, n := range credentialHeaders {
		out[n] = true
	}
	for _, n := range extra {
		out[textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(n))] = true
	}
	return out
}

// SealedPrefix begins every sealed value (package secrets' tokens): a
// cheap test on the attempt path, before the token is opened. The API
// refuses a task header that begins with it, so that a value a client
// gives is never taken for one retryd sealed.
const SealedPrefix = store.SealedPrefix

// LooksSealed reports whether v begins as a sealed value does.
func LooksSealed(v string) bool { return strings.HasPrefix(v, SealedPrefix) }

// headerAD is what a task header is sealed for: its tenant, task and name.
func headerAD(tenant, taskID, name string) []byte {
	return []byte(tenant + "\x00task\x00" + taskID + "\x00" + textproto.CanonicalMIMEHeaderKey(name))
}

// rewrite returns h with f applied to each of its values, and whether f
// changed any; h itself, not a copy, when it changed none, so that a task
// without such headers costs nothing on the attempt path. order, when not
// nil, is the names of h in the order to visit them; nil is the map's.
func rewrite(h map[string]string, order []string, f func(name, v string) (string, error)) (map[string]string, bool, error) {
	out, changed := h, false
	apply := func(name, v string) error {
		nv, err := f(name, v)
		if err != nil || nv == v {
			return err
		}
		if !changed {
			out, changed = maps.Clone(h), true
		}
		out[name] = nv
		return nil
	}
	if order != nil {
		for _, name := range order {
			if err := apply(name, h[name]); err != nil {
				return nil, false, err
			}
		}
		return out, changed, nil
	}
	for name, v := range h {
		if err := apply(name, v); err != nil {
			return nil, false, err
		}
	}
	return out, changed, nil
}

// SealHeaders returns h with the values of the headers names lists sealed
// for task taskID of tenant, or h itself when it has none of them.
func SealHeaders(k Sealer, tenant, taskID string, h map[string]string, names map[string]bool) map[string]string {
	out, _, _ := rewrite(h, nil, func(name, v string) (string, error) {
		if !names[textproto.CanonicalMIMEHeaderKey(name)] || LooksSealed(v) {
			return v, nil
		}
		return k.Seal([]byte(v), headerAD(tenant, taskID, name)), nil
	})
	return out
}

// OpenHeaders returns h with its sealed values opened, or h itself when
// none is sealed: what an attempt sends.
func OpenHeaders(k Sealer, tenant, taskID string, h map[string]string) (map[string]string, error) {
	out, _, err := rewrite(h, nil, func(name, v string) (string, error) {
		if !LooksSealed(v) {
			return v, nil
		}
		if k == nil {
			return "", errNoKeys
		}
		plain, err := k.Open(v, headerAD(tenant, taskID, name))
		return string(plain), err
	})
	return out, err
}

// ResealHeaders returns h with every sealed value sealed again by reseal
// (a Keyring's Reseal) for task taskID of tenant, and whether any token
// changed; h itself when none did. It is what a key rotation does to a
// task's headers. The first value that does not open fails it, naming
// the header but never its value.
func ResealHeaders(reseal func(token string, ad []byte) (string, bool, error), tenant, taskID string,
	h map[string]string) (map[string]string, bool, error) {
	// In the order of their names, so that of several values that do not
	// open, the same one is reported each time.
	return rewrite(h, slices.Sorted(maps.Keys(h)), func(name, v string) (string, error) {
		if !LooksSealed(v) {
			return v, nil
		}
		tok, _, err := reseal(v, headerAD(tenant, taskID, name))
		if err != nil {
			return "", fmt.Errorf("task %s: header %s: %w", taskID, name, err)
		}
		return tok, nil
	})
}

// MaskHeaders returns h as answers show it: the values of credential
// headers, and every sealed one, replaced by mask; h itself when none is.
func MaskHeaders(h map[string]string, mask string) map[string]string {
	out, _, _ := rewrite(h, nil, func(name, v string) (string, error) {
		if LooksSealed(v) || isCredential(textproto.CanonicalMIMEHeaderKey(name)) {
			return mask, nil
		}
		return v, nil
	})
	return out
}

func isCredential(canon string) bool {
	for _, n := range credentialHeaders {
		if n == canon {
			return true
		}
	}
	return false
}

// HasSecretHeader reports whether h holds a header that names lists (see
// SecretHeaderNames).
func HasSecretHeader(h map[string]string, names map[string]bool) bool {
	for name := range h {
		if names[textproto.CanonicalMIMEHeaderKey(name)] {
			return true
		}
	}
	return false
}

// DigestHeaders returns h with the value of each header names lists
// replaced by its keyed digest under mac, in hex: what a request's hash
// takes in their place.
func DigestHeaders(mac func([]byte) []byte, h map[string]string, names map[string]bool) map[string]string {
	out, _, _ := rewrite(h, nil, func(name, v string) (string, error) {
		if names[textproto.CanonicalMIMEHeaderKey(name)] {
			return "hmac:" + hex.EncodeToString(mac([]byte(v))), nil
		}
		return v, nil
	})
	return out
}
