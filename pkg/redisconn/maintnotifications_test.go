package redisconn

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
)

// A client of Clients and its Conns (on which WaitReplicas writes) set up
// their first connections at once without a data race. go-redis v9.23.0's
// auto mode of maintenance notifications downgrades itself, on a server
// that refuses them, by writing the Options a client shares with its
// Conns under a lock each holds apart; the race detector reports that
// write (each round below does, with the mode left as is).
func TestClientsAndTheirConnsConnectAtOnce(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range 10 {
		c := Config{Mode: v1alpha1.ModeStandalone, Addrs: []string{s.Addr}, NodeTimeout: 10 * time.Second}.Clients()[0]
		rc, ok := c.(*redis.Client)
		if !ok {
			t.Fatalf("Clients gave a %T for one server; want a *redis.Client", c)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for range 8 {
			wg.Go(func() { errs <- rc.Ping(ctx).Err() })
			wg.Go(func() {
				cn := rc.Conn()
				defer func() { _ = cn.Close() }()
				errs <- cn.Ping(ctx).Err()
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
