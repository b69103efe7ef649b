package redis

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// RouteClientLogs sends go-redis's own messages (a failed dial during an
// outage, say) to l at Warn, attributed to component=go-redis, instead of
// the plain text go-redis prints on standard error by default, which breaks
// a JSON log stream. go-redis keeps one logger for the whole process, so this
// is for a program's main to call once, not for a Store: it affects every
// go-redis client in the process.
func RouteClientLogs(l *slog.Logger) {
	goredis.SetLogger(clientLog{l})
}

type clientLog struct{ l *slog.Logger }

func (c clientLog) Printf(ctx context.Context, format string, v ...any) {
	c.l.Log(ctx, slog.LevelWarn, strings.TrimSpace(fmt.Sprintf(format, v...)), "component", "go-redis")
}
