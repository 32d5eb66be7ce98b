package redistest

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/redislock/redislock/internal/testing/proc"
	"github.com/redislock/redislock/internal/testing/redisproc"
)

// StartCluster starts a Redis Cluster of n masters without replicas and
// returns their addresses.
func StartCluster(t testing.TB, n int) []string {
	t.Helper()
	return StartReplicatedCluster(t, n, 0).Addrs
}

// ClusterClient returns a client of the Cluster at addrs, with timeouts
// that follow the caller's context, closed when t ends. Like
// redisproc.Server.ClientOptions, it asks for no maintenance
// notifications, whose auto mode races in go-redis v9.23.0 when a client
// and its Conns connect at once (redisconn sets the same, and says why).
func ClusterClient(t testing.TB, addrs []string) *redis.ClusterClient {
	c := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: addrs, ContextTimeoutEnabled: true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Cluster is a Redis Cluster of real servers.
type Cluster struct {
	// Servers are its nodes, masters and replicas as redis-cli --cluster
	// create assigned them, and Addrs their addresses.
	Servers []*redisproc.Server
	Addrs   []string
	// args are the extra arguments every node started with.
	args []string
}

// StartReplicatedCluster starts a Redis Cluster of masters, each with
// replicas replicas, every node started with args too (such as a shorter
// --cluster-node-timeout), with redis-cli --cluster create, and returns
// once every node sees every slot served and every master has its
// replicas online. Within cluster-node-timeout every node has pinged every
// other (it pings any peer it has not heard from for half of it), so the
// nodes agree within that; the whole start may take twice that on a loaded
// machine, and the replicas' first sync some seconds more. A failure shows
// each node's CLUSTER INFO and CLUSTER NODES.
func StartReplicatedCluster(t testing.TB, masters, replicas int, args ...string) *Cluster {
	t.Helper()
	c := &Cluster{args: args}
	for range masters * (1 + replicas) {
		s := c.startNode(t)
		c.Addrs = append(c.Addrs, s.Addr)
	}
	addrs := c.Addrs
	nodeTimeout, err := clusterNodeTimeout(addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	within := 2*nodeTimeout + replicaSync
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	create := append([]string{"--cluster", "create"}, addrs...)
	create = append(create, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.CommandContext(ctx, "redis-cli", create...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create (within %v): %v\n%s\n%s", within, err, out, clusterState(addrs))
	}
	err = pollUntil(ctx, within, func(ctx context.Context) (bool, error) { return c.healthy(ctx, replicas), nil })
	if err != nil {
		t.Fatalf("Redis Cluster not ok, or its replicas not online, within %v (twice cluster-node-timeout, and %v): %v\n%s", within, replicaSync, err, clusterState(addrs))
	}
	return c
}

// clusterNodeTimeout reads cluster-node-timeout from the node at addr.
func clusterNodeTimeout(addr string) (time.Duration, error) {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer func() { _ = c.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
	defer cancel()
	cfg, err := c.ConfigGet(ctx, "cluster-node-timeout").Result()
	if err != nil {
		return 0, fmt.Errorf("CONFIG GET cluster-node-timeout on %s: %w", addr, err)
	}
	return millis(cfg, "cluster-node-timeout")
}

// clusterState is each node's own view of the cluster, for a failure
// message.
func clusterState(addrs []string) string {
	var b strings.Builder
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a, ContextTimeoutEnabled: true})
		ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
		info, err := c.ClusterInfo(ctx).Result()
		nodes, nerr := c.ClusterNodes(ctx).Result()
		cancel()
		_ = c.Close()
		fmt.Fprintf(&b, "node %s:\n  CLUSTER INFO: %s\n  CLUSTER NODES:\n%s", a, oneLine(info, err), indent(nodes, nerr))
	}
	return b.String()
}

// replicaSync bounds the replicas' sync with their master, on a loaded
// machine.
const replicaSync = 30 * time.Second

// within bounds a change of the Cluster's state: twice the node timeout
// (the time its nodes take to agree), and replicaSync.
func (c *Cluster) within() time.Duration {
	d, err := clusterNodeTimeout(c.Addrs[0])
	if err != nil {
		d = 15 * time.Second
	}
	return 2*d + replicaSync
}

// Shard is the master that serves a slot, and its online replicas.
type Shard struct {
	Master   *redisproc.Server
	Replicas []*redisproc.Server
}

// SlotShard returns who serves slot now, as the first node that answers
// CLUSTER SHARDS says.
func (c *Cluster) SlotShard(ctx context.Context, slot int64) (Shard, error) {
	var last error
	for _, s := range c.Servers {
		cl := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true})
		qctx, cancel := context.WithTimeout(ctx, stateTimeout)
		shards, err := cl.ClusterShards(qctx).Result()
		cancel()
		_ = cl.Close()
		if err != nil {
			last = err
			continue
		}
		for _, sh := range shards {
			if !slices.ContainsFunc(sh.Slots, func(r redis.SlotRange) bool { return r.Start <= slot && slot <= r.End }) {
				continue
			}
			var out Shard
			for _, n := range sh.Nodes {
				srv := c.server(net.JoinHostPort(n.IP, strconv.FormatInt(n.Port, 10)))
				switch {
				case srv == nil:
				case n.Role == "master":
					out.Master = srv
				case n.Health == "online":
					out.Replicas = append(out.Replicas, srv)
				}
			}
			if out.Master != nil {
				return out, nil
			}
		}
		last = fmt.Errorf("no master serves slot %d", slot)
	}
	return Shard{}, fmt.Errorf("redistest: who serves slot %d: %w", slot, last)
}

func (c *Cluster) server(addr string) *redisproc.Server {
	for _, s := range c.Servers {
		if s.Addr == addr {
			return s
		}
	}
	return nil
}

// WaitHealthy waits until every node reports the cluster ok, slot's master
// is not the server at not (""), and every master has replicas replicas
// online; it returns slot's shard then.
func (c *Cluster) WaitHealthy(ctx context.Context, slot int64, not string, replicas int) (Shard, error) {
	var sh Shard
	err := pollUntil(ctx, c.within(), func(ctx context.Context) (bool, error) {
		if !c.healthy(ctx, replicas) {
			return false, nil
		}
		var err error
		sh, err = c.SlotShard(ctx, slot)
		return err == nil && sh.Master.Addr != not && len(sh.Replicas) >= replicas, nil
	})
	if err != nil {
		return Shard{}, fmt.Errorf("redistest: the Cluster not healthy within %v (slot %d's master other than %q, %d replicas online each): %w\n%s", c.within(), slot, not, replicas, err, clusterState(c.Addrs))
	}
	return sh, nil
}

// healthy reports whether every node reports the cluster ok and every
// master has replicas replicas online.
func (c *Cluster) healthy(ctx context.Context, replicas int) bool {
	for _, s := range c.Servers {
		cl := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true})
		qctx, cancel := context.WithTimeout(ctx, stateTimeout)
		info, err := cl.ClusterInfo(qctx).Result()
		repl, rerr := cl.Info(qctx, "replication").Result()
		cancel()
		_ = cl.Close()
		if err != nil || rerr != nil || !strings.Contains(info, "cluster_state:ok") {
			return false
		}
		if strings.Contains(repl, "role:master") && strings.Count(repl, ",state=online,") < replicas {
			return false
		}
	}
	return true
}

// MigrateSlot moves slot to the master to, as redis-cli --cluster reshard
// does: IMPORTING on to, MIGRATING on its master, every key moved with
// MIGRATE, then SETSLOT NODE on every master. Between those steps the
// slot's clients meet ASK, TRYAGAIN and MOVED.
func (c *Cluster) MigrateSlot(ctx context.Context, slot int64, to *redisproc.Server) error {
	return c.MigrateSlotWith(ctx, slot, to, MigrationSteps{})
}

// MigrateSlotHeld is MigrateSlot with the slot left MIGRATING and
// IMPORTING, no key moved, for hold first: a migration that stalls (a
// slow or interrupted reshard).
func (c *Cluster) MigrateSlotHeld(ctx context.Context, slot int64, to *redisproc.Server, hold time.Duration) error {
	return c.MigrateSlotWith(ctx, slot, to, MigrationSteps{Migrating: func(ctx context.Context) error {
		t := time.NewTimer(hold)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}})
}

// MigrationSteps are what MigrateSlotWith runs between the steps of a
// migration; a nil one is skipped, an error ends the migration there.
type MigrationSteps struct {
	// Migrating runs once the slot is IMPORTING on the target and
	// MIGRATING on its master, before any key moves.
	Migrating func(ctx context.Context) error
	// Moved runs once every key of the slot is on the target, before
	// SETSLOT NODE.
	Moved func(ctx context.Context) error
}

// MigrateSlotWith is MigrateSlot with steps run along the way.
func (c *Cluster) MigrateSlotWith(ctx context.Context, slot int64, to *redisproc.Server, steps MigrationSteps) error {
	sh, err := c.SlotShard(ctx, slot)
	if err != nil {
		return err
	}
	if sh.Master == to {
		return nil
	}
	src, dst := sh.Master.Client(), to.Client()
	defer func() { _ = src.Close(); _ = dst.Close() }()
	srcID, err := src.Do(ctx, "cluster", "myid").Text()
	if err != nil {
		return fmt.Errorf("redistest: migrate slot %d: %w", slot, err)
	}
	dstID, err := dst.Do(ctx, "cluster", "myid").Text()
	if err != nil {
		return fmt.Errorf("redistest: migrate slot %d: %w", slot, err)
	}
	if err := dst.Do(ctx, "cluster", "setslot", slot, "importing", srcID).Err(); err != nil {
		return fmt.Errorf("redistest: migrate slot %d: SETSLOT IMPORTING on %s: %w", slot, to.Addr, err)
	}
	if err := src.Do(ctx, "cluster", "setslot", slot, "migrating", dstID).Err(); err != nil {
		return fmt.Errorf("redistest: migrate slot %d: SETSLOT MIGRATING on %s: %w", slot, sh.Master.Addr, err)
	}
	if steps.Migrating != nil {
		if err := steps.Migrating(ctx); err != nil {
			return fmt.Errorf("redistest: migrate slot %d: %w", slot, err)
		}
	}
	host, port, _ := net.SplitHostPort(to.Addr)
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, int(slot), 10).Result()
		if err != nil {
			return fmt.Errorf("redistest: migrate slot %d: %w", slot, err)
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"migrate", host, port, "", 0, 5000, "replace", "keys"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := src.Do(ctx, args...).Err(); err != nil {
			return fmt.Errorf("redistest: migrate slot %d: MIGRATE %v: %w", slot, keys, err)
		}
	}
	if steps.Moved != nil {
		if err := steps.Moved(ctx); err != nil {
			return fmt.Errorf("redistest: migrate slot %d: %w", slot, err)
		}
	}
	// The new owner first, then the old, then the others, as redis-cli does.
	order := []*redisproc.Server{to, sh.Master}
	for _, s := range c.Servers {
		if s != to && s != sh.Master {
			order = append(order, s)
		}
	}
	for _, s := range order {
		cl := s.Client()
		err := cl.Do(ctx, "cluster", "setslot", slot, "node", dstID).Err()
		_ = cl.Close()
		// A replica refuses SETSLOT ("use SETSLOT only with masters"); only
		// the masters need it.
		if err != nil && !strings.Contains(err.Error(), "only with masters") {
			return fmt.Errorf("redistest: migrate slot %d: SETSLOT NODE on %s: %w", slot, s.Addr, err)
		}
	}
	return nil
}

// startNode starts a Cluster-enabled node with c's arguments (the same for
// every node: a node timeout of its own would change how soon it fails
// over and how long after a failed election it tries again), adds it to
// c.Servers and returns it.
func (c *Cluster) startNode(t testing.TB) *redisproc.Server {
	t.Helper()
	// The bus port defaults to the port plus 10000, which no one checked
	// was free (another test's server had it once).
	bus, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	s := Start(t, redisproc.Options{Args: append([]string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-port", strconv.Itoa(bus)}, c.args...)})
	c.Servers = append(c.Servers, s)
	return s
}

// AddReplica starts a node with the Cluster's arguments, has it meet the
// Cluster through master and replicate master, and returns it once master
// has it online and every node knows it. It joins c.Servers (not c.Addrs,
// the seed addresses).
func (c *Cluster) AddReplica(t testing.TB, master *redisproc.Server) *redisproc.Server {
	t.Helper()
	s := c.startNode(t)
	ctx := context.Background()
	mc, sc := master.Client(), s.Client()
	defer func() { _, _ = mc.Close(), sc.Close() }()
	id, err := mc.Do(ctx, "cluster", "myid").Text()
	if err != nil {
		t.Fatal(err)
	}
	// The nodes' bus ports are not port+10000: MEET names it.
	cfg, err := mc.ConfigGet(ctx, "cluster-port").Result()
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(master.Addr)
	if err := sc.Do(ctx, "cluster", "meet", host, port, cfg["cluster-port"]).Err(); err != nil {
		t.Fatal(err)
	}
	err = pollUntil(ctx, c.within(), func(ctx context.Context) (bool, error) {
		// CLUSTER REPLICATE needs the master known first.
		return sc.Do(ctx, "cluster", "replicate", id).Err() == nil, nil
	})
	if err != nil {
		t.Fatalf("CLUSTER REPLICATE %s on %s within %v: %v\n%s", id, s.Addr, c.within(), err, clusterState(c.Addrs))
	}
	sid, err := sc.Do(ctx, "cluster", "myid").Text()
	if err != nil {
		t.Fatal(err)
	}
	err = pollUntil(ctx, c.within(), func(ctx context.Context) (bool, error) {
		info, err := mc.Info(ctx, "replication").Result()
		if err != nil || !strings.Contains(info, "port="+strings.Split(s.Addr, ":")[1]+",state=online") {
			return false, nil
		}
		for _, o := range c.Servers {
			oc := o.Client()
			nodes, err := oc.ClusterNodes(ctx).Result()
			_ = oc.Close()
			if err != nil || !strings.Contains(nodes, sid) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the added replica %s not online and known to every node within %v: %v\n%s%s%s", s.Addr, c.within(), err, clusterState(c.Addrs), replicationState("master", master), replicationState("added replica", s))
	}
	return s
}

// replicationState is a node's INFO replication and the tail of its log,
// for a failure message.
func replicationState(role string, s *redisproc.Server) string {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true})
	defer func() { _ = c.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
	defer cancel()
	info, err := c.Info(ctx, "replication").Result()
	return fmt.Sprintf("%s %s:\n  INFO replication:\n%s  log:\n%s", role, s.Addr, indent(info, err), indent(s.LogTail(4096), nil))
}
