package redislock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// WaitAllReplicas is the Options.WaitReplicas that makes every acquire,
// renew and fencing write wait until as many replicas of its node (in a
// Cluster, of the master of the lock's slot) have acknowledged it as the
// most the node has had connected: INFO replication, read in the same
// round trip as each write, counts them, in any state (a replica still in
// its sync is waited for). The count never goes down. The replicas
// connected now are not the replicas that may be promoted: after a
// failover, Sentinel reconfigures the other replicas to the new master one
// by one, and may promote one before it is attached again; a wait for the
// replicas connected at that moment let grants count that no replica had,
// and the chaos run found 12 overlaps in 10 minutes. So that a Client made
// during such a reconfiguration (a restarted candidate) knows the count
// too, the node keeps it in a record every write reads in its round trip
// and the first to see more raises: the key P + "replicas" (P is
// Options.KeyPrefix), in a Cluster one per slot, P + "{<tag>}:replicas",
// beside the epoch marker (see epoch.go); it never expires, and it is
// replicated with the writes it counts for. So, as a fixed count equal to
// the replicas, it makes writes fail after a failover until the old master
// has rejoined as a replica, and a replica removed for good is waited for
// until the record is deleted and the candidates restart.
const WaitAllReplicas = -1

// processAndWait sends one command and a WAIT on one connection (WAIT
// covers that connection's writes), in one round trip, to the node's
// server or, in a Cluster, to the master of the command's first key,
// following a MOVED or an ASK there. Too few acknowledgements within half
// the node timeout (the other half is for the round trip) make the call
// fail.
func (n *node) processAndWait(ctx context.Context, args []any) (any, error) {
	var (
		addr   string // where a MOVED or an ASK sent the call
		asking bool
		v      any
		err    error
	)
	for range 3 { // the slot's master, then at most two redirections
		var conn *redis.Conn
		if conn, err = n.waitConn(ctx, keyArg(args[3]), addr); err != nil {
			return nil, err
		}
		v, err = n.writeAndWait(ctx, conn, args, asking)
		_ = conn.Close()
		if n.cluster == nil || err == nil {
			return v, err
		}
		moved, isMoved := redis.IsMovedError(err)
		ask, isAsk := redis.IsAskError(err)
		switch {
		case isMoved:
			n.cluster.ReloadState(ctx)
			addr, asking = moved, false
		case isAsk:
			addr, asking = ask, true
		default:
			// A master that is gone or no longer one: the next call
			// asks the Cluster anew.
			if !strings.HasPrefix(err.Error(), "ERR") {
				n.cluster.ReloadState(ctx)
			}
			return v, err
		}
	}
	return v, err
}

// waitConn returns a dedicated connection to the node's server or, in a
// Cluster, to the master at addr or ("") the master of key's slot.
func (n *node) waitConn(ctx context.Context, key, addr string) (*redis.Conn, error) {
	if n.cluster == nil {
		return n.sticky.Conn(), nil
	}
	if addr == "" {
		c, err := n.cluster.MasterForKey(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("find the master of %s: %w", key, err)
		}
		return c.Conn(), nil
	}
	var (
		mu    sync.Mutex
		found *redis.Client
	)
	_ = n.cluster.ForEachShard(ctx, func(_ context.Context, c *redis.Client) error {
		if c.Options().Addr == addr {
			mu.Lock()
			found = c
			mu.Unlock()
		}
		return nil
	})
	if found == nil {
		return nil, fmt.Errorf("redirected to %s, which the Cluster client does not know", addr)
	}
	return found.Conn(), nil
}

// writeAndWait sends, on conn, with WaitAllReplicas INFO replication and
// a GET of the node's replicas record, then ASKING if asking, the command
// and a WAIT: for n.replicas, or for the most replicas this Client has
// seen. If INFO or the record says more, the record is raised (on conn, so
// that the WAIT covers it) and a second WAIT asks for that many.
func (n *node) writeAndWait(ctx context.Context, conn *redis.Conn, args []any, asking bool) (any, error) {
	all := n.replicas == WaitAllReplicas
	asked := int64(n.replicas)
	if all {
		asked = int64(n.most.Load())
	}
	var (
		record     string
		info, seen *redis.StringCmd
	)
	if all {
		record = n.replicasKey(lockName(keyArg(args[3])))
		info, seen = redis.NewStringCmd(ctx, "info", "replication"), redis.NewStringCmd(ctx, "get", record)
	}
	cmd := redis.NewCmd(ctx, args...)
	cmd.SetFirstKeyPos(3)
	wait := redis.NewIntCmd(ctx, "wait", asked, n.waitMs)
	_, _ = conn.Pipelined(ctx, func(p redis.Pipeliner) error {
		if all {
			_ = p.Process(ctx, info)
			if asking {
				_ = p.Process(ctx, redis.NewStatusCmd(ctx, "asking"))
			}
			_ = p.Process(ctx, seen)
		}
		// ASKING holds for the one command after it.
		if asking {
			_ = p.Process(ctx, redis.NewStatusCmd(ctx, "asking"))
		}
		_ = p.Process(ctx, cmd)
		return p.Process(ctx, wait)
	})
	v, err := cmd.Result()
	if err != nil {
		return v, err
	}
	acked, err := wait.Result()
	if err != nil {
		return nil, fmt.Errorf("wait for replicas: %w", err)
	}
	want, which, waited := asked, "", asked
	if all {
		which = " most connected"
		text, err := info.Result()
		if err != nil {
			return nil, fmt.Errorf("count the connected replicas: %w", err)
		}
		want = max(want, int64(connectedReplicas(text)))
		recorded, err := seen.Int64()
		switch {
		case err == nil, errors.Is(err, redis.Nil):
			want = max(want, recorded)
			if want > recorded {
				// Raise the record; the WAIT after it covers it too.
				if acked, err = n.raiseRecord(ctx, conn, record, want, asking); err != nil {
					return nil, fmt.Errorf("record %d replicas in %s: %w", want, record, err)
				}
				waited = want
			}
		case isRedirect(err):
			// The record is on the other master of a migrating slot:
			// count without it.
		default:
			return nil, fmt.Errorf("read the replicas record %s: %w", record, err)
		}
		n.raiseMost(int32(want))
	}
	if acked < want && waited < want {
		if acked, err = conn.Do(ctx, "wait", want, n.waitMs).Int64(); err != nil {
			return nil, fmt.Errorf("wait for replicas: %w", err)
		}
	}
	if acked < want {
		return nil, fmt.Errorf("%w: %d of the %d%s replicas acknowledged the write within %dms", ErrReplication, acked, want, which, n.waitMs)
	}
	return v, nil
}

// raiseScript sets KEYS[1] to ARGV[1] unless it holds a greater number.
const raiseScript = `local c = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
if tonumber(ARGV[1]) > c then redis.call('SET', KEYS[1], ARGV[1]) end
return 0`

// raiseRecord raises the replicas record to want on conn (never lowering
// it, whoever raced), then WAITs for want replicas, which covers the write
// and the raise, and returns how many acknowledged.
func (n *node) raiseRecord(ctx context.Context, conn *redis.Conn, record string, want int64, asking bool) (int64, error) {
	raise := redis.NewCmd(ctx, "eval", raiseScript, 1, record, want)
	wait := redis.NewIntCmd(ctx, "wait", want, n.waitMs)
	_, _ = conn.Pipelined(ctx, func(p redis.Pipeliner) error {
		if asking {
			_ = p.Process(ctx, redis.NewStatusCmd(ctx, "asking"))
		}
		_ = p.Process(ctx, raise)
		return p.Process(ctx, wait)
	})
	if err := raise.Err(); err != nil {
		return 0, err
	}
	return wait.Result()
}

// isRedirect says err is a Cluster's answer for a key that is elsewhere or
// in transit: MOVED, ASK or TRYAGAIN.
func isRedirect(err error) bool {
	_, moved := redis.IsMovedError(err)
	_, ask := redis.IsAskError(err)
	return moved || ask || redis.HasErrorPrefix(err, "TRYAGAIN")
}

// lockName is the name in a lock key's hash tag, P + "{" + name + "}"
// (neither P nor a name holds a brace).
func lockName(lockKey string) string {
	_, rest, _ := strings.Cut(lockKey, "{")
	name, _, _ := strings.Cut(rest, "}")
	return name
}

// raiseMost raises the most replicas seen connected to m, never lowering it.
func (n *node) raiseMost(m int32) {
	for {
		cur := n.most.Load()
		if m <= cur || n.most.CompareAndSwap(cur, m) {
			return
		}
	}
}

// connectedReplicas counts the replicas that INFO replication lists
// ("slave0:ip=...,port=...,state=online,..."), in any state: online, or
// waiting for or receiving its sync.
func connectedReplicas(info string) int {
	n := 0
	for line := range strings.Lines(info) {
		if strings.HasPrefix(line, "slave") && strings.Contains(line, ":ip=") {
			n++
		}
	}
	return n
}

// keyArg is a script call's key argument, which the Lock passes by
// pointer.
func keyArg(a any) string {
	switch k := a.(type) {
	case *string:
		return *k
	case string:
		return k
	}
	return fmt.Sprint(a)
}
