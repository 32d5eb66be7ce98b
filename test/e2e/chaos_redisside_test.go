package e2e

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/redislock/redislock/internal/testing/redisproc"
)

// redisSideFaults are the faults that happen inside Redis rather than to
// a candidate or a server process: an admin's DEL of the lock key, the
// README's force-release annotation, and a FLUSHALL of a node (on a
// single node, or a Sentinel master, it forgets the lock, its validity and
// the node's epoch marker at once, and the restart guard holds every new
// grant back for a ttl). None may give two leaders (S1).
func (r *chaosRun) redisSideFaults(nodes []*redisproc.Server) map[string]func(*rand.Rand) string {
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
	faults["flush"] = func(rng *rand.Rand) string {
		// As with DEL: a replica refuses it.
		for _, i := range rng.Perm(len(nodes)) {
			c := nodes[i].Client()
			err := c.FlushAll(context.Background()).Err()
			_ = c.Close()
			if err == nil {
				return nodes[i].Addr
			}
		}
		r.t.Errorf("FLUSHALL: no node took it")
		return ""
	}
	return faults
}
