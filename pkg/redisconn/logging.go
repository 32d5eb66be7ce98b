package redisconn

import (
	"context"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
)

// RouteRedisLogs sends go-redis's own log lines (pool, Sentinel and
// PubSub messages it writes to the standard logger by default) through
// log, as structured lines under the name "go-redis", so that a process's
// output is one format. go-redis has one logger per process.
func RouteRedisLogs(log logr.Logger) {
	redis.SetLogger(redisLogger{log.WithName("go-redis")})
}

type redisLogger struct{ log logr.Logger }

func (l redisLogger) Printf(_ context.Context, format string, v ...any) {
	l.log.Info(strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: "))
}
