package redislock

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// WaitAllReplicas is the Options.WaitReplicas that makes every acquire,
// renew and fencing write wait until as many replicas of its node (in a
// Cluster, of the master of the lock's slot) have acknowledged it as the
// most the node has had connected since the Client was made: INFO
// replication, read in the same round trip as each write, counts them, in
// any state (a replica still in its sync is waited for). The count never
// goes down. The replicas connected now are not the replicas that may be
// promoted: after a failover, Sentinel reconfigures the other replicas to
// the new master one by one, and may promote one before it is attached
// again; a wait for the replicas connected at that moment let grants count
// that no replica had, and the chaos run found 12 overlaps in 10 minutes.
// So, as a fixed count equal to the replicas, it makes writes fail after a
// failover until the old master has rejoined as a replica, and a replica
// removed for good is waited for until the candidates restart.
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

// writeAndWait sends, on conn, ASKING if asking, INFO replication for
// WaitAllReplicas, the command and a WAIT: for n.replicas, or for the
// most replicas the node has had connected; if INFO lists more than that
// (one more connected) and fewer acknowledged, a second WAIT asks for all
// of them.
func (n *node) writeAndWait(ctx context.Context, conn *redis.Conn, args []any, asking bool) (any, error) {
	all := n.replicas == WaitAllReplicas
	asked := int64(n.replicas)
	if all {
		asked = int64(n.most.Load())
	}
	info := redis.NewStringCmd(ctx, "info", "replication")
	cmd := redis.NewCmd(ctx, args...)
	cmd.SetFirstKeyPos(3)
	wait := redis.NewIntCmd(ctx, "wait", asked, n.waitMs)
	_, _ = conn.Pipelined(ctx, func(p redis.Pipeliner) error {
		if asking {
			_ = p.Process(ctx, redis.NewStatusCmd(ctx, "asking"))
		}
		if all {
			_ = p.Process(ctx, info)
		}
		_ = p.Process(ctx, cmd)
		return p.Process(ctx, wait)
	})
	v, err := cmd.Result()
	if err != nil {
		return v, err
	}
	want, which := asked, ""
	if all {
		text, err := info.Result()
		if err != nil {
			return nil, fmt.Errorf("count the connected replicas: %w", err)
		}
		want, which = max(asked, int64(connectedReplicas(text))), " most connected"
		n.raiseMost(int32(want))
	}
	acked, err := wait.Result()
	if err == nil && acked < want && asked < want {
		acked, err = conn.Do(ctx, "wait", want, n.waitMs).Int64()
	}
	if err != nil {
		return nil, fmt.Errorf("wait for replicas: %w", err)
	}
	if acked < want {
		return nil, fmt.Errorf("%w: %d of the %d%s replicas acknowledged the write within %dms", ErrReplication, acked, want, which, n.waitMs)
	}
	return v, nil
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
