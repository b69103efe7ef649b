package destination_test

import (
	"crypto/rand"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/retrykit/retry/service/destination"
	"github.com/retrykit/retry/service/destination/secrets"
)

// A rotation's reseal of task headers: what the old key sealed moves to
// the new one, and opens without the old key; what the new key sealed, or
// was never sealed, stays as it is.
func TestResealHeaders(t *testing.T) {
	t.Parallel()
	oldKey, newKey := make([]byte, secrets.KeySize), make([]byte, secrets.KeySize)
	rand.Read(oldKey)
	rand.Read(newKey)
	before, err := secrets.NewKeyring(oldKey)
	if err != nil {
		t.Fatal(err)
	}
	during, err := secrets.NewKeyring(newKey, oldKey)
	if err != nil {
		t.Fatal(err)
	}
	after, err := secrets.NewKeyring(newKey)
	if err != nil {
		t.Fatal(err)
	}
	names := destination.SecretHeaderNames([]string{"X-Api-Key"})
	plain := map[string]string{"Authorization": "Bearer tok-1", "X-Api-Key": "key-2", "Content-Type": "text/plain"}
	sealed := destination.SealHeaders(before, "acme", "task-1", plain, names)
	if _, err := destination.OpenHeaders(after, "acme", "task-1", sealed); !errors.Is(err, secrets.ErrNoKey) {
		t.Fatalf("the new key alone opens the old key's headers: %v", err)
	}

	moved, changed, err := destination.ResealHeaders(during.Reseal, "acme", "task-1", sealed)
	if err != nil || !changed {
		t.Fatalf("ResealHeaders() = changed %v, %v; want changed", changed, err)
	}
	if sealed["Authorization"] == moved["Authorization"] || !strings.HasPrefix(moved["Authorization"], "sec:v1:"+after.KeyID()+":") {
		t.Errorf("Authorization %q was not sealed again with key %s", moved["Authorization"], after.KeyID())
	}
	opened, err := destination.OpenHeaders(after, "acme", "task-1", moved)
	if err != nil || !maps.Equal(opened, plain) {
		t.Fatalf("OpenHeaders(new key) = %v, %v; want %v", opened, err, plain)
	}

	again, changed, err := destination.ResealHeaders(during.Reseal, "acme", "task-1", moved)
	if err != nil || changed || !maps.Equal(again, moved) {
		t.Errorf("second ResealHeaders() = %v, changed %v, %v; want the headers as they are", again, changed, err)
	}
	if h, changed, err := destination.ResealHeaders(during.Reseal, "acme", "task-1", plain); err != nil || changed || !maps.Equal(h, plain) {
		t.Errorf("ResealHeaders(nothing sealed) = %v, changed %v, %v", h, changed, err)
	}

	// A value that does not open fails the reseal, naming the header and
	// not its value: here, one sealed for another task.
	_, _, err = destination.ResealHeaders(during.Reseal, "acme", "task-2", sealed)
	if !errors.Is(err, secrets.ErrCorrupt) || !strings.Contains(err.Error(), "header Authorization") ||
		strings.Contains(err.Error(), sealed["Authorization"]) {
		t.Errorf("ResealHeaders(another task's) = %v; want ErrCorrupt naming the Authorization header", err)
	}
	// Without the old key, its tokens do not open.
	if _, _, err := destination.ResealHeaders(after.Reseal, "acme", "task-1", sealed); !errors.Is(err, secrets.ErrNoKey) {
		t.Errorf("ResealHeaders() without the old key = %v, want ErrNoKey", err)
	}
}
