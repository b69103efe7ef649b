package store_test

import (
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

// IDs are version 7 UUIDs: canonical text, their time first, so that IDs
// made later sort later, and unique.
func TestNewID(t *testing.T) {
	seen := map[string]bool{}
	prev := ""
	for i := range 2000 {
		id := store.NewID()
		if len(id) != 36 || id[8] != '-' || id[13] != '-' || id[18] != '-' || id[23] != '-' || id[14] != '7' ||
			!strings.ContainsRune("89ab", rune(id[19])) {
			t.Fatalf("NewID() = %q, not a canonical version 7 UUID", id)
		}
		if seen[id] {
			t.Fatalf("NewID() repeated %q", id)
		}
		seen[id] = true
		if i > 0 && id[:13] < prev[:13] {
			t.Fatalf("NewID() = %q after %q: its time went back", id, prev)
		}
		prev = id
		if i == 1000 {
			time.Sleep(2 * time.Millisecond)
		}
	}
}

func TestIsID(t *testing.T) {
	for s, want := range map[string]bool{
		store.NewID():                            true,
		"9B2E4F7A-1C3D-4E5F-8A9B-0C1D2E3F4A5B":   true,
		"9b2e4f7a1c3d4e5f8a9b0c1d2e3f4a5b":       false, // no dashes
		"{9b2e4f7a-1c3d-4e5f-8a9b-0c1d2e3f4a5b}": false,
		"urn:uuid:9b2e4f7a-1c3d-4e5f-8a9b-0c1d":  false,
		"9b2e4f7a-1c3d-4e5f-8a9b-0c1d2e3f4a5g":   false,
		"9b2e4f7a-1c3d-4e5f-8a9b_0c1d2e3f4a5b":   false,
		"":                                       false,
	} {
		if got := store.IsID(s); got != want {
			t.Errorf("IsID(%q) = %v, want %v", s, got, want)
		}
	}
}
