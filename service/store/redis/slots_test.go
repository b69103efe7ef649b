package redis_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/retrykit/retry/service/store/redis"
)

// keySlot is Redis Cluster's slot of key (CLUSTER KEYSLOT): CRC16-XMODEM
// of its hash tag (the text between the first '{' and the next '}', when
// not empty) or of the whole key, modulo 16384.
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}

// slotChecker watches the scripts stores run: it fails the test of any
// whose KEYS span two slots, and tells which scripts never ran. The
// scripts of oneServer are the exception: they run only on a single
// server, where they may span slots, and never on a cluster.
type slotChecker struct {
	t       *testing.T
	cluster bool // the stores are on a Redis Cluster
	mu      sync.Mutex
	names   map[string]string // SHA-1 → script name
	ran     map[string]int    // script name → runs checked
}

// oneServer are the scripts a store runs only on a single server.
var oneServer = map[string]bool{"createfast": true}

func newSlotChecker(t *testing.T, cluster bool) *slotChecker {
	return &slotChecker{t: t, cluster: cluster, ran: map[string]int{}}
}

// watch makes c check the scripts s runs, and returns s.
func (c *slotChecker) watch(s *redis.Store) *redis.Store {
	c.mu.Lock()
	if c.names == nil {
		c.names = redis.ScriptNames(s)
	}
	c.mu.Unlock()
	redis.Client(s).AddHook(c)
	return s
}

// verify fails t unless every script ran at least once.
func (c *slotChecker) verify(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, name := range slices.Sorted(maps.Values(c.names)) {
		switch {
		case c.cluster && oneServer[name] && c.ran[name] > 0:
			t.Errorf("script %s ran %d times on a cluster", name, c.ran[name])
		case c.cluster && oneServer[name]:
		case c.ran[name] == 0:
			t.Errorf("script %s never ran: its keys went unchecked", name)
		}
	}
}

func (c *slotChecker) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (c *slotChecker) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		c.check(cmd)
		return next(ctx, cmd)
	}
}

func (c *slotChecker) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		for _, cmd := range cmds {
			c.check(cmd)
		}
		return next(ctx, cmds)
	}
}

func (c *slotChecker) check(cmd goredis.Cmder) {
	args := cmd.Args()
	name := strings.ToLower(fmt.Sprint(args[0]))
	if name != "eval" && name != "evalsha" && name != "eval_ro" && name != "evalsha_ro" {
		return
	}
	digest := fmt.Sprint(args[1])
	if strings.HasPrefix(name, "eval") && !strings.HasPrefix(name, "evalsha") {
		sum := sha1.Sum([]byte(digest))
		digest = hex.EncodeToString(sum[:])
	}
	n, err := strconv.Atoi(fmt.Sprint(args[2]))
	if err != nil || len(args) < 3+n {
		c.t.Errorf("%s with numkeys %v and %d arguments", name, args[2], len(args))
		return
	}
	c.mu.Lock()
	script := c.names[digest]
	c.ran[script]++
	c.mu.Unlock()
	if n == 0 {
		c.t.Errorf("script %s declares no keys", script)
	}
	if oneServer[script] && !c.cluster {
		return
	}
	slot := -1
	for _, k := range args[3 : 3+n] {
		key := fmt.Sprint(k)
		switch s := keySlot(key); {
		case slot == -1:
			slot = s
		case s != slot:
			c.t.Errorf("script %s: key %q is in slot %d, the first key (%q) in slot %d", script, key, s, args[3], slot)
		}
	}
}

func TestKeySlot(t *testing.T) {
	t.Parallel()
	// Slots from CLUSTER KEYSLOT of Redis 7.0; the cluster test checks
	// more against a live server.
	tests := []struct {
		name string
		key  string
		want int
	}{
		{name: "no tag", key: "foo", want: 12182},
		{name: "tag", key: "x{p:3}y", want: 13414},
		{name: "tag alone", key: "{p:3}", want: 13414},
		{name: "first tag wins", key: "{user1000}.following{x}", want: keySlot("user1000")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := keySlot(tt.key); got != tt.want {
				t.Errorf("keySlot(%q) = %d, want %d", tt.key, got, tt.want)
			}
		})
	}
}
