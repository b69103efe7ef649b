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

// ParseID and FormatID are each other's inverse on the lower-case form;
// ParseID reads either case.
func TestParseFormatID(t *testing.T) {
	id := store.NewID()
	u, ok := store.ParseID(id)
	if !ok || store.FormatID(u) != id {
		t.Fatalf("ParseID(%q) = %x, %v; formatted back %q", id, u, ok, store.FormatID(u))
	}
	upper, ok := store.ParseID(strings.ToUpper(id))
	if !ok || upper != u {
		t.Errorf("ParseID of the upper-case form = %x, %v, want %x", upper, ok, u)
	}
	want := [16]byte{0x9b, 0x2e, 0x4f, 0x7a, 0x1c, 0x3d, 0x4e, 0x5f, 0x8a, 0x9b, 0x0c, 0x1d, 0x2e, 0x3f, 0x4a, 0x5b}
	if got, _ := store.ParseID("9b2e4f7a-1c3d-4e5f-8a9b-0c1d2e3f4a5b"); got != want {
		t.Errorf("ParseID = %x, want %x", got, want)
	}
}
