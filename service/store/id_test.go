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
