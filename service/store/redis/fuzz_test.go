package redis_test

import (
	"slices"
	"testing"

	"github.com/retrykit/retry/service/store/redis"
)

// Records read back from Redis go through Unpack: whatever the bytes, it
// must not panic, and the fields it returns pack and unpack to themselves.
func FuzzUnpack(f *testing.F) {
	f.Add(redis.Pack("3", "tenant-a", "policy-1"))
	f.Add(redis.Pack("", "a:b", "\x00\xff"))
	f.Add("5:ab")
	f.Add("-1:")
	f.Add("+2:ab05:abcde")
	f.Fuzz(func(t *testing.T, s string) {
		fields, err := redis.Unpack(s)
		if err != nil {
			return
		}
		again, err := redis.Unpack(redis.Pack(fields...))
		if err != nil || !slices.Equal(again, fields) {
			t.Fatalf("Unpack(Pack(%q)) = %q, %v", fields, again, err)
		}
	})
}
