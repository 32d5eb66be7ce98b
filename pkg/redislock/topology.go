package redislock

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"
	"k8s.io/utils/clock"
)

const (
	// topologyMaxAge is how long WaitAllReplicas trusts what it read of
	// a master's replicas: Sentinel's own INFO period.
	topologyMaxAge = 10 * time.Second
	// topologyRetry is how soon it reads them again while writes find a
	// replica the topology does not list, or one it lists detached.
	topologyRetry = time.Second
)

// topology holds, per master, the replicas WaitAllReplicas reads from
// whoever promotes them (see WaitAllReplicas), by "ip:port": true for
// those that may be promoted.
type topology struct {
	clock clock.PassiveClock
	// read reads them on conn, a connection to the master; nil for a
	// client of one server, where no one but its operator promotes.
	read func(ctx context.Context, conn *redis.Conn) (map[string]bool, error)

	mu       sync.Mutex
	byMaster map[string]*replicaView
	reads    singleflight.Group
}

// replicaView is one master's replicas as last read, and how many
// replicas the last write to it waited for.
type replicaView struct {
	replicas map[string]bool
	readAt   time.Time
	stale    bool // a write found it disagreeing with INFO
	need     int
}

// newTopology returns the topology of rc: its Sentinels' for a
// SentinelNode, the master's own in a Cluster, none otherwise.
func newTopology(rc redis.UniversalClient, clk clock.PassiveClock) *topology {
	t := &topology{clock: clk, byMaster: map[string]*replicaView{}}
	switch c := rc.(type) {
	case *SentinelNode:
		t.read = func(ctx context.Context, _ *redis.Conn) (map[string]bool, error) { return c.promotable(ctx) }
	case *redis.ClusterClient:
		t.read = clusterReplicas
	}
	return t
}

// view returns master's replicas, read again when they are older than
// topologyMaxAge, or than topologyRetry and stale, and how many replicas
// the last write to master waited for. A read that fails leaves the last
// view in use; with none, the error is returned.
func (t *topology) view(ctx context.Context, conn *redis.Conn, master string) (replicas map[string]bool, need int, err error) {
	t.mu.Lock()
	v := t.byMaster[master]
	if v != nil {
		need = v.need
	}
	if t.read == nil {
		t.mu.Unlock()
		return nil, need, nil
	}
	if v != nil {
		age := t.clock.Now().Sub(v.readAt)
		if age < topologyMaxAge && (!v.stale || age < topologyRetry) {
			t.mu.Unlock()
			return v.replicas, need, nil
		}
	}
	t.mu.Unlock()
	got, err, _ := t.reads.Do(master, func() (any, error) {
		r, err := t.read(ctx, conn)
		if err != nil {
			return nil, err
		}
		t.mu.Lock()
		if nv := t.byMaster[master]; nv != nil {
			nv.replicas, nv.readAt, nv.stale = r, t.clock.Now(), false
		} else {
			t.byMaster[master] = &replicaView{replicas: r, readAt: t.clock.Now()}
		}
		t.mu.Unlock()
		return r, nil
	})
	if err != nil {
		if v != nil {
			return v.replicas, need, nil
		}
		return nil, 0, fmt.Errorf("%w: read which replicas may be promoted: %w", ErrReplication, err)
	}
	return got.(map[string]bool), need, nil
}

// waited records that a write to master waited for need replicas.
func (t *topology) waited(master string, need int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	v := t.byMaster[master]
	if v == nil {
		// A client of one server: nothing read, readAt never used.
		v = &replicaView{}
		t.byMaster[master] = v
	}
	v.need = need
}

// stale marks master's view as disagreeing with what a write found.
func (t *topology) stale(master string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if v := t.byMaster[master]; v != nil {
		v.stale = true
	}
}

// clusterReplicas reads, on conn to a Cluster master, its replicas
// (CLUSTER MYID, then CLUSTER REPLICAS of that id): true for each but
// those the Cluster flags failed. A node in its handshake is not listed:
// if it is attached, it is waited for as any replica the topology does
// not know.
func clusterReplicas(ctx context.Context, conn *redis.Conn) (map[string]bool, error) {
	id, err := conn.Do(ctx, "cluster", "myid").Text()
	if err != nil {
		return nil, fmt.Errorf("CLUSTER MYID: %w", err)
	}
	lines, err := conn.Do(ctx, "cluster", "replicas", id).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("CLUSTER REPLICAS: %w", err)
	}
	out := map[string]bool{}
	for _, line := range lines {
		// <id> <ip:port@cport[,hostname]> <flags> <master> ...
		f := strings.Fields(line)
		if len(f) < 3 {
			return nil, fmt.Errorf("CLUSTER REPLICAS: a line of %d fields: %q", len(f), line)
		}
		addr, _, _ := strings.Cut(f[1], "@")
		host, port, err := net.SplitHostPort(addr)
		if err != nil || port == "0" {
			continue // no address known yet
		}
		flags := strings.Split(f[2], ",")
		if slices.Contains(flags, "handshake") {
			continue // not a member yet: waited for if attached
		}
		out[net.JoinHostPort(host, port)] = !slices.Contains(flags, "fail")
	}
	return out, nil
}
