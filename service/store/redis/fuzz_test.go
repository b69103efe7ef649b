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
	f.Add("id 5 7\nid2 6")
	f.Add("id 5 -7")
	f.Fuzz(func(t *testing.T, msg string) {
		for _, d := range redis.ParseWakes(msg) {
			if d.ID == "" || strings.ContainsAny(d.ID, " \n") || d.At.UnixMilli() <= 0 || d.Version < 0 {
				t.Fatalf("wake-up %v from %q", d, msg)
			}
		}
	})
}
