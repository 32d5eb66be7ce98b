package redisconn

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/pkg/redislock"
)

// BenchmarkTenantUserRedisCPU prices the ACL check of a namespace's user:
// two like servers, one reached as the default user (no ACL rules), one
// as TenantACL's user; each iteration obtains and releases a lock on one,
// then on the other, so that both see the same machine. It reports each
// server's CPU (INFO cpu, user and system) per acquire+release, and their
// ratio.
func BenchmarkTenantUserRedisCPU(b *testing.B) {
	ctx := context.Background()
	open, confined := redistest.Start(b, redisproc.Options{}), redistest.Start(b, redisproc.Options{})
	args := []any{"acl", "setuser", TenantUser("shop"), "reset", "on", ">pw"}
	for _, r := range TenantACL("uid", "shop", nil) {
		args = append(args, r)
	}
	if err := redistest.Clients(b, confined)[0].Do(ctx, args...).Err(); err != nil {
		b.Fatal(err)
	}
	client := func(rc redis.UniversalClient) *redislock.Client {
		b.Cleanup(func() { _ = rc.Close() })
		c, err := redislock.New([]redis.UniversalClient{rc}, &redislock.Options{Identity: "bench", AssumeDurable: true})
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	clients := []*redislock.Client{
		client(redis.NewClient(&redis.Options{Addr: open.Addr})),
		client(redis.NewClient(&redis.Options{Addr: confined.Addr, Username: TenantUser("shop"), Password: "pw"})),
	}
	servers := redistest.Clients(b, open, confined)
	cpu := func() [2]float64 {
		var out [2]float64
		for i, s := range servers {
			info, err := s.Info(ctx, "cpu").Result()
			if err != nil {
				b.Fatal(err)
			}
			out[i] = infoSeconds(info, "used_cpu_user") + infoSeconds(info, "used_cpu_sys")
		}
		return out
	}
	before := cpu()
	b.ResetTimer()
	for range b.N {
		for _, c := range clients {
			l, err := c.Obtain(ctx, "uid/shop/bench", 10*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	after := cpu()
	per := func(i int) float64 { return (after[i] - before[i]) * 1e6 / float64(b.N) }
	b.ReportMetric(per(0), "open-µs/op")
	b.ReportMetric(per(1), "confined-µs/op")
	b.ReportMetric(per(1)/per(0), "ratio")
}

// infoSeconds is the field name of an INFO reply, in seconds.
func infoSeconds(info, name string) float64 {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}
