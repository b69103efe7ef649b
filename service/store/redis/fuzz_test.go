package redis_test

import (
	"slices"
	"strings"
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

// Wake-up messages come from the network: any payload parses without
// panicking, into IDs without separators and positive times.
func FuzzParseWakes(f *testing.F) {
	f.Add("0b6c2f56-1f7e-4b1e-9a56-5d0c4b7d7a11 1955001234567")
	f.Add("a 1\nb 2\n\nc x\n d 3")
	f.Add("id -5")
	f.Fuzz(func(t *testing.T, msg string) {
		ids, dues := redis.ParseWakes(msg)
		if len(ids) != len(dues) {
			t.Fatalf("%d IDs, %d times", len(ids), len(dues))
		}
		for i, id := range ids {
			if id == "" || strings.ContainsAny(id, " \n") || dues[i].UnixMilli() <= 0 {
				t.Fatalf("wake-up %q at %v from %q", id, dues[i], msg)
			}
		}
	})
}
