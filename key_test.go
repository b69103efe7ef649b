package retry_test

import (
	"regexp"
	"testing"

	"github.com/retrykit/retry"
)

func TestNewIdempotencyKey(t *testing.T) {
	t.Parallel()
	v4 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for range 1000 {
		k := retry.NewIdempotencyKey()
		if !v4.MatchString(k) {
			t.Fatalf("%q is not a version 4 UUID", k)
		}
		if seen[k] {
			t.Fatalf("%q twice", k)
		}
		seen[k] = true
	}
}
