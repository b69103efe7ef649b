package redis_test

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/retrykit/retry/service/store/redis"
)

// TestRouteClientLogs points a go-redis client at a closed port and checks
// that what go-redis says about it arrives as a JSON record, not plain text.
// go-redis's logger is process-wide, so this test does not run in parallel.
func TestRouteClientLogs(t *testing.T) {
	var out lockedBuffer
	redis.RouteClientLogs(slog.New(slog.NewJSONHandler(&out, nil)))
	t.Cleanup(func() { redis.RouteClientLogs(slog.New(slog.DiscardHandler)) })

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := 0; i < 20 && !strings.Contains(out.String(), `"component":"go-redis"`); i++ {
		_ = c.Ping(ctx).Err()
		time.Sleep(10 * time.Millisecond)
	}
	got := out.String()
	if !strings.Contains(got, `"component":"go-redis"`) || !strings.Contains(got, `"level":"WARN"`) {
		t.Errorf("no go-redis record in the slog output; got %q", got)
	}
}

// TestOpenHidesPasswordOfBadURL: an unparseable URL's error reaches logs, so
// it must not quote the password.
func TestOpenHidesPasswordOfBadURL(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{"redis://user:s3cret@127.0.0.1:bad/0", "redis+cluster://:s3cret@127.0.0.1:port%/0"} {
		_, err := redis.Open(context.Background(), raw)
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%q) = %v, want an error without the password", raw, err)
		}
	}
}
