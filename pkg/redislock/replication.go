package redislock

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// WaitAllReplicas is the Options.WaitReplicas that makes every acquire,
// renew and fencing write wait until every replica that may be promoted in
// its master's place has acknowledged it (in a Cluster, every replica of
// the master of the lock's slot). Which replicas may be promoted is the
// topology's answer, read from whoever promotes them, not a count:
//   - a SentinelNode asks its Sentinels (SENTINEL REPLICAS): every replica
//     a Sentinel lists, less those that every Sentinel that answered has
//     down (s_down, o_down) and those of replica-priority 0, which
//     Sentinel never promotes;
//   - a Cluster's master answers in each write's own round trip (CLUSTER
//     NODES, after the WAIT): its replicas and theirs, and the replicas of
//     a failed master that serves no slot (deposed, they have not yet
//     heard who took its slots), less those the Cluster flags failed (see
//     clusterReplicas);
//   - a client of one server (redis.NewClient) has no one to promote a
//     replica but its operator: the replicas attached to it.
//
// To these it adds any replica attached to the master that the topology
// does not list yet. A connection without a listening port (port=0 in
// INFO replication: redis-cli --rdb or --replica, a backup or sync tool)
// is never waited for. Each write reads INFO replication in its round trip
// twice: after the write, for the master's replication offset, and after a
// WAIT, for the offset each replica acknowledged (in a Cluster, CLUSTER
// NODES too, once per call, a refused acquire's included: it goes in the
// same round trip, before the outcome is known); the write counts once
// every replica waited for has acknowledged it, within half the node
// timeout in all. A replica that may be promoted but is detached (a
// restart, a network cut, a failover reconfiguring it) fails every write
// until it is back, or until the Sentinels see it down
// (down-after-milliseconds) or the Cluster flags it failed: it may be
// promoted meanwhile. The Sentinels are asked at the first write to a
// master, then at most every topologyMaxAge, and at most every
// topologyRetry while writes find them disagreeing with INFO. Nothing is
// kept in Redis, so no deleted or evicted key, and no one Client's past,
// changes what is waited for.
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
		var (
			conn   *redis.Conn
			master string
		)
		if conn, master, err = n.waitConn(ctx, keyArg(args[3]), addr); err != nil {
			return nil, err
		}
		v, err = n.writeAndWait(ctx, conn, master, args, asking)
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
// Cluster, to the master at addr or ("") the master of key's slot, and
// that master's address ("" outside a Cluster).
func (n *node) waitConn(ctx context.Context, key, addr string) (*redis.Conn, string, error) {
	if n.cluster == nil {
		return n.sticky.Conn(), "", nil
	}
	if addr == "" {
		c, err := n.cluster.MasterForKey(ctx, key)
		if err != nil {
			return nil, "", fmt.Errorf("find the master of %s: %w", key, err)
		}
		return c.Conn(), c.Options().Addr, nil
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
		return nil, "", fmt.Errorf("redirected to %s, which the Cluster client does not know", addr)
	}
	return found.Conn(), addr, nil
}

// writeAndWait sends, on conn to master (its address; "" for the one
// master of a client of one server), then ASKING if asking, the command
// and a WAIT: for n.replicas, or, with WaitAllReplicas, for the replicas
// that may be promoted, each checked by the offset it acknowledged (see
// WaitAllReplicas).
func (n *node) writeAndWait(ctx context.Context, conn *redis.Conn, master string, args []any, asking bool) (any, error) {
	if n.replicas != WaitAllReplicas {
		cmd, wait := n.newWrite(ctx, args), redis.NewIntCmd(ctx, "wait", n.replicas, n.waitMs)
		_, _ = conn.Pipelined(ctx, func(p redis.Pipeliner) error {
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
		if acked < int64(n.replicas) {
			return nil, fmt.Errorf("%w: %d of %d replicas acknowledged the write within %dms", ErrReplication, acked, n.replicas, n.waitMs)
		}
		return v, nil
	}
	known, last, err := n.topo.view(ctx, master)
	if err != nil {
		return nil, err
	}
	start := n.clock.Now()
	before := redis.NewSliceCmd(ctx, "role")
	cmd := n.newWrite(ctx, args)
	written := redis.NewStringCmd(ctx, "info", "replication")
	// As many as may be promoted, or as the last write to master had to
	// wait for (those attached that the topology does not list count too).
	wait := redis.NewIntCmd(ctx, "wait", max(promotableCount(known), last), n.waitMs)
	acked := redis.NewStringCmd(ctx, "info", "replication")
	// A Cluster master's view of who may take its place, read after the
	// WAIT: a failover changes it within a gossip round, faster than any
	// view kept between writes would follow.
	nodes := redis.NewStringCmd(ctx, "cluster", "nodes")
	_, _ = conn.Pipelined(ctx, func(p redis.Pipeliner) error {
		_ = p.Process(ctx, before)
		// ASKING holds for the one command after it.
		if asking {
			_ = p.Process(ctx, redis.NewStatusCmd(ctx, "asking"))
		}
		_ = p.Process(ctx, cmd)
		_ = p.Process(ctx, written)
		_ = p.Process(ctx, wait)
		_ = p.Process(ctx, acked)
		if n.cluster != nil {
			return p.Process(ctx, nodes)
		}
		return nil
	})
	v, err := cmd.Result()
	if err != nil {
		return v, err
	}
	w, err := readReplication(written)
	if err != nil {
		return nil, err
	}
	// The pipeline runs without another client's command in between, so
	// the offset moved only if the script wrote: a call that wrote nothing
	// (a refused acquire, a renewal of a lost lock) has nothing to wait for.
	if from, err := roleOffset(before); err != nil {
		return nil, err
	} else if from == w.offset {
		return v, nil
	}
	if n.cluster != nil {
		text, err := nodes.Result()
		if err != nil {
			return nil, fmt.Errorf("%w: read which replicas may be promoted: CLUSTER NODES: %w", ErrReplication, err)
		}
		if known, err = clusterReplicas(text); err != nil {
			return nil, fmt.Errorf("%w: read which replicas may be promoted: %w", ErrReplication, err)
		}
	}
	need := make(map[string]bool, len(known))
	for addr, promotable := range known {
		if promotable {
			need[addr] = true
		}
	}
	for addr := range w.replicas {
		if _, listed := known[addr]; !listed {
			// Attached, but not in the topology: waited for, and the
			// topology (where there is one) read again soon.
			need[addr] = true
			n.topo.stale(master)
		}
	}
	n.topo.waited(master, len(need))
	if err := wait.Err(); err != nil {
		return nil, fmt.Errorf("wait for replicas: %w", err)
	}
	a, err := readReplication(acked)
	if err != nil {
		return nil, err
	}
	missing := a.lacking(need, w.offset)
	if detached := a.detached(missing); len(detached) > 0 {
		n.topo.stale(master)
		return nil, fmt.Errorf("%w: replica %s, which may be promoted, is not attached to the master", ErrReplication, strings.Join(detached, ", "))
	}
	if left := n.waitMs - int(n.clock.Since(start).Milliseconds()); len(missing) > 0 && left > 0 {
		// A WAIT counts any replica: others may have made up the count.
		// Wait for every one attached, within what is left.
		again := redis.NewIntCmd(ctx, "wait", len(a.replicas), left)
		acked = redis.NewStringCmd(ctx, "info", "replication")
		_, _ = conn.Pipelined(ctx, func(p redis.Pipeliner) error {
			_ = p.Process(ctx, again)
			return p.Process(ctx, acked)
		})
		if err := again.Err(); err != nil {
			return nil, fmt.Errorf("wait for replicas: %w", err)
		}
		if a, err = readReplication(acked); err != nil {
			return nil, err
		}
		missing = a.lacking(need, w.offset)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: %d of the %d replicas that may be promoted acknowledged the write within %dms; not %s", ErrReplication, len(need)-len(missing), len(need), n.waitMs, strings.Join(missing, ", "))
	}
	return v, nil
}

// roleOffset is the replication offset in a master's reply to ROLE.
func roleOffset(cmd *redis.SliceCmd) (int64, error) {
	r, err := cmd.Result()
	if err != nil {
		return 0, fmt.Errorf("read ROLE: %w", err)
	}
	if len(r) < 2 || r[0] != "master" {
		return 0, fmt.Errorf("ROLE says %v: not a master", r)
	}
	off, ok := r[1].(int64)
	if !ok {
		return 0, fmt.Errorf("ROLE gives the offset as %T", r[1])
	}
	return off, nil
}

// newWrite is the command of a script call laid out by script.args.
func (n *node) newWrite(ctx context.Context, args []any) *redis.Cmd {
	cmd := redis.NewCmd(ctx, args...)
	cmd.SetFirstKeyPos(3)
	return cmd
}

// promotableCount is how many of known may be promoted.
func promotableCount(known map[string]bool) int {
	c := 0
	for _, p := range known {
		if p {
			c++
		}
	}
	return c
}

// replication is what INFO replication says of a master: its replication
// offset, and the replicas attached to it with a listening port, by
// "ip:port".
type replication struct {
	offset   int64
	replicas map[string]attached
}

// attached is one replica in INFO replication: its state ("online",
// "wait_bgsave", "send_bulk") and the offset it acknowledged.
type attached struct {
	state  string
	offset int64
}

// readReplication parses the reply of an INFO replication.
func readReplication(cmd *redis.StringCmd) (replication, error) {
	text, err := cmd.Result()
	if err != nil {
		return replication{}, fmt.Errorf("read INFO replication: %w", err)
	}
	r := replication{replicas: map[string]attached{}}
	found := false
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\r\n")
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		if key == "master_repl_offset" {
			r.offset, err = strconv.ParseInt(value, 10, 64)
			found = err == nil
			continue
		}
		if !strings.HasPrefix(key, "slave") {
			continue
		}
		f := map[string]string{}
		for kv := range strings.SplitSeq(value, ",") {
			k, v, _ := strings.Cut(kv, "=")
			f[k] = v
		}
		if f["port"] == "" || f["port"] == "0" {
			continue // no listening port: a backup or sync tool
		}
		off, _ := strconv.ParseInt(f["offset"], 10, 64)
		r.replicas[net.JoinHostPort(f["ip"], f["port"])] = attached{state: f["state"], offset: off}
	}
	if !found {
		return replication{}, fmt.Errorf("INFO replication has no master_repl_offset")
	}
	return r, nil
}

// lacking returns, sorted, the replicas of need that have not acknowledged
// offset.
func (r replication) lacking(need map[string]bool, offset int64) []string {
	var out []string
	for addr := range need {
		if a, ok := r.replicas[addr]; !ok || a.state != "online" || a.offset < offset {
			out = append(out, addr)
		}
	}
	slices.Sort(out)
	return out
}

// detached returns those of addrs not attached to the master at all.
func (r replication) detached(addrs []string) []string {
	var out []string
	for _, addr := range addrs {
		if _, ok := r.replicas[addr]; !ok {
			out = append(out, addr)
		}
	}
	return out
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
