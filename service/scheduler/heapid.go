package scheduler

import (
	"strings"

	"github.com/retrykit/retry/service/store"
)

// parseID returns the 16 bytes of id, a UUID in the canonical lower-case
// text form store.NewID makes, or ok false for any other ID, even an
// upper-case UUID: the heap gives IDs back as store.FormatID writes them,
// so only those it writes back unchanged are packed.
func parseID(id string) (u [16]byte, ok bool) {
	u, ok = store.ParseID(id)
	return u, ok && strings.IndexAny(id, "ABCDEF") < 0
}
