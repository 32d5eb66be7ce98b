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
	// read reads them; nil for a client of one server, where no one but
	// its operator promotes, and for a Cluster, whose master tells with
	// each write.
	read func(ctx context.Context) (map[string]bool, error)

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
// SentinelNode; none otherwise (a Cluster master's own comes with each
// write: see clusterReplicas).
func newTopology(rc redis.UniversalClient, clk clock.PassiveClock) *topology {
	t := &topology{clock: clk, byMaster: map[string]*replicaView{}}
	switch c := rc.(type) {
	case *SentinelNode:
		t.read = c.promotable
	}
	return t
}

// view returns master's replicas, read again when they are older than
// topologyMaxAge, or than topologyRetry and stale, and how many replicas
// the last write to master waited for. A read that fails leaves the last
// view in use; with none, the error is returned.
func (t *topology) view(ctx context.Context, master string) (replicas map[string]bool, need int, err error) {
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
		r, err := t.read(ctx)
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

// clusterReplicas reads, from a Cluster master's CLUSTER NODES, the
// nodes the Cluster may promote in its place, by "ip:port": true for each
// but those it flags failed. They are:
//   - its replicas, and replicas of those (a failover leaves the old
//     master's other replicas following it until they hear of the new
//     one: their data reaches this master's WAIT only through it);
//   - the replicas of a failed master that serves no slot: a master
//     deposed by a failover whose replicas have not yet heard who took
//     its slots. They follow whoever did, and may be promoted before they
//     have synced: which master that is, this view does not say, so they
//     count for every master until they follow one.
//
// A node in its handshake or without an address is not listed: if it is
// attached, it is waited for as any replica the topology does not know.
func clusterReplicas(text string) (map[string]bool, error) {
	type entry struct {
		addr, master string
		flags        []string
		slots        bool
	}
	nodes := map[string]entry{}
	self := ""
	for line := range strings.Lines(text) {
		// <id> <ip:port@cport[,hostname]> <flags> <master> <ping-sent>
		// <pong-recv> <config-epoch> <link-state> [<slot> ...]
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 8 {
			return nil, fmt.Errorf("CLUSTER NODES: a line of %d fields: %q", len(f), line)
		}
		addr, _, _ := strings.Cut(f[1], "@")
		addr, _, _ = strings.Cut(addr, ",")
		e := entry{addr: addr, master: f[3], flags: strings.Split(f[2], ","), slots: len(f) > 8}
		nodes[f[0]] = e
		if slices.Contains(e.flags, "myself") {
			self = f[0]
		}
	}
	if self == "" {
		return nil, fmt.Errorf("CLUSTER NODES names no node myself")
	}
	// ours tells whether a node that follows master may take self's
	// place. Each node's answer is worked out once (a hostile reply's long
	// chain costs one walk, not one per node); a loop, which only a torn
	// view has, answers false.
	memo := map[string]bool{}
	var ours func(master string) bool
	ours = func(master string) bool {
		if master == self {
			return true
		}
		if v, done := memo[master]; done {
			return v
		}
		memo[master] = false // on the walk: a loop ends here
		m, ok := nodes[master]
		v := false
		switch {
		case !ok:
		case slices.Contains(m.flags, "slave"):
			v = ours(m.master)
		default:
			v = !m.slots && slices.Contains(m.flags, "fail")
		}
		memo[master] = v
		return v
	}
	out := map[string]bool{}
	for id, e := range nodes {
		if id == self || !slices.Contains(e.flags, "slave") || slices.Contains(e.flags, "handshake") || slices.Contains(e.flags, "noaddr") {
			continue
		}
		host, port, err := net.SplitHostPort(e.addr)
		if err != nil || port == "0" || !ours(e.master) {
			continue
		}
		out[net.JoinHostPort(host, port)] = !slices.Contains(e.flags, "fail")
	}
	return out, nil
}
