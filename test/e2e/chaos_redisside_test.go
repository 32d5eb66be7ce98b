package e2e

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/redislock/redislock/internal/redisproc"
)

// redisSideFaults are the faults that happen inside Redis rather than to
// a candidate or a server process: an admin's DEL of the lock key, the
// README's force-release annotation, and with Redlock nodes a FLUSHALL of
// one of them. None may give two leaders (S1).
//
// A FLUSHALL of a single node that has been up for longer than the ttl is
// the one gap left (the README's persistence section): it forgets the
// lock and the time its holder may still act, and the restart guard does
// not fire, so it is not among them.
func (r *chaosRun) redisSideFaults(nodes []*redisproc.Server, redlock bool) map[string]func(*rand.Rand) string {
	key := "redislock:{" + lockIn(r.t, r.ns) + "/chaos}"
	faults := map[string]func(*rand.Rand) string{
		"del": func(rng *rand.Rand) string {
			// Replicas refuse writes: the first node that takes the DEL
			// is a master.
			for _, i := range rng.Perm(len(nodes)) {
				c := nodes[i].Client()
				err := c.Del(context.Background(), key).Err()
				_ = c.Close()
				if err == nil {
					return nodes[i].Addr
				}
			}
			r.t.Errorf("DEL %s: no node took it", key)
			return ""
		},
		"forcerelease": func(*rand.Rand) string {
			if out, err := kubectl(r.t, "annotate", "--overwrite", "-n", r.ns, "redislock", "chaos", "redislock.io/force-release=chaos-"+time.Now().Format("150405.000")); err != nil {
				r.t.Errorf("annotate for a force-release: %v\n%s", err, out)
			}
			return "chaos"
		},
	}
	if redlock {
		faults["flush"] = func(rng *rand.Rand) string {
			s := nodes[rng.IntN(len(nodes))]
			c := s.Client()
			defer func() { _ = c.Close() }()
			if err := c.FlushAll(context.Background()).Err(); err != nil {
				r.t.Errorf("FLUSHALL %s: %v", s.Addr, err)
			}
			return s.Addr
		}
	}
	return faults
}
