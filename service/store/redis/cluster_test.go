package redis_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store/redis"
)

// startCluster starts a Redis Cluster of one node that serves every slot.
// A cluster node refuses a command or script whose keys span slots
// (CROSSSLOT), and a script declared with #!lua that touches a key of
// another slot than its KEYS', so the conformance suite run against it
// proves every script keeps to one slot.
func startCluster(t *testing.T) *server {
	t.Helper()
	srv := startServer(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--appendonly", "no")
	c := srv.client()
	defer c.Close()
	ctx := context.Background()
	if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
		t.Fatalf("CLUSTER ADDSLOTSRANGE: %v", err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		info, err := c.ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			return srv
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster state did not become ok: %q, %v", info, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestCluster(t *testing.T) {
	t.Parallel()
	srv := startCluster(t)
	url := strings.Replace(srv.url(), "redis://", "redis+cluster://", 1)
	url = strings.TrimSuffix(url, "/0")
	t.Run("conformance", func(t *testing.T) {
		conformance(t, url, "retrykit-test:")
	})
	t.Run("listen", func(t *testing.T) {
		s := closeAtEnd(t, open(t, url, "retrykit-test:listen:"))
		wakes, _, _ := listen(t, s)
		waitSubscribed(t, srv.url(), redis.WakeChannel(s, s.Partition("acme", "p")), 1)
		tk := createIn(t, s, "acme", "p", 1, 0)[0]
		expectWake(t, wakes, tk.ID, t0)
	})
	t.Run("plain URL", func(t *testing.T) {
		// A cluster node reached as a single server (as some proxies and
		// managed services present one): creates keep to one slot, as on
		// a cluster client, and a store that took it for a single server
		// finds out at its first create and creates all the same.
		s := closeAtEnd(t, open(t, srv.url(), "retrykit-test:plain:"))
		createIn(t, s, "acme", "p", 2, 0)
		fooled := closeAtEnd(t, open(t, srv.url(), "retrykit-test:fooled:"))
		redis.SetOneServer(fooled, true)
		createIn(t, fooled, "acme", "p", 2, 0)
	})
	t.Run("key slots", func(t *testing.T) {
		s := closeAtEnd(t, open(t, url, "retrykit-test:slots:"))
		c := srv.client()
		defer c.Close()
		keys := []string{"foo", "a{}b", "{}", "a{b", "}{x}", redis.WakeChannel(s, 3)}
		for p := range s.Partitions() {
			keys = append(keys, "retrykit-test:slots:{p:"+strconv.Itoa(p)+"}:due")
		}
		for _, key := range keys {
			want, err := c.ClusterKeySlot(context.Background(), key).Result()
			if err != nil {
				t.Fatal(err)
			}
			if got := keySlot(key); got != int(want) {
				t.Errorf("keySlot(%q) = %d, CLUSTER KEYSLOT says %d", key, got, want)
			}
		}
	})
}
