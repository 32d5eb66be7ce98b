package redislock

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	clocktesting "k8s.io/utils/clock/testing"
)

// What WaitAllReplicas asks whoever promotes replicas (E1): one read per
// master at its first write, then none until topologyMaxAge has passed,
// however many writes; while writes find the topology disagreeing with
// INFO, at most one read per topologyRetry; a failed read keeps the last
// view, and with none fails the write.
func TestTopologyIsReadOncePerMaxAgeAndRetryWhileStale(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1_000_000, 0))
	reads := 0
	var fail error
	topo := &topology{clock: clk, byMaster: map[string]*replicaView{}, read: func(context.Context) (map[string]bool, error) {
		reads++
		if fail != nil {
			return nil, fail
		}
		return map[string]bool{"10.0.0.1:6379": true}, nil
	}}
	ctx := context.Background()
	view := func(master string) map[string]bool {
		t.Helper()
		v, _, err := topo.view(ctx, master)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for range 100 {
		view("a")
	}
	if reads != 1 {
		t.Fatalf("100 writes to one master read the topology %d times; want 1", reads)
	}
	view("b")
	if reads != 2 {
		t.Fatalf("a second master: %d reads; want 2, one per master", reads)
	}
	clk.SetTime(clk.Now().Add(topologyMaxAge - time.Millisecond))
	view("a")
	if reads != 2 {
		t.Fatalf("before topologyMaxAge: %d reads; want still 2", reads)
	}
	clk.SetTime(clk.Now().Add(time.Millisecond))
	view("a")
	if reads != 3 {
		t.Fatalf("at topologyMaxAge: %d reads; want 3", reads)
	}
	topo.stale("a")
	for range 100 {
		view("a")
	}
	if reads != 3 {
		t.Fatalf("stale within topologyRetry of the last read: %d reads; want 3", reads)
	}
	clk.SetTime(clk.Now().Add(topologyRetry))
	for range 100 {
		view("a")
	}
	if reads != 4 {
		t.Fatalf("stale, topologyRetry after the last read, 100 writes: %d reads; want 4", reads)
	}
	fail = errors.New("no Sentinel answers")
	clk.SetTime(clk.Now().Add(topologyMaxAge))
	if v := view("a"); !v["10.0.0.1:6379"] {
		t.Fatalf("a failed read gave %v; want the last view kept", v)
	}
	if _, _, err := topo.view(ctx, "c"); !errors.Is(err, ErrReplication) || !errors.Is(err, fail) {
		t.Fatalf("a failed first read: %v; want ErrReplication wrapping the cause", err)
	}
}

// Whom SENTINEL REPLICAS says a Sentinel may promote: not a replica it has
// down, subjectively or objectively, nor one of priority 0 (the field is
// slave-priority in Redis 7.0's reply).
func TestSentinelMayPromote(t *testing.T) {
	for _, c := range []struct {
		r    map[string]string
		want bool
	}{
		{map[string]string{"flags": "slave", "slave-priority": "100"}, true},
		{map[string]string{"flags": "slave,disconnected", "slave-priority": "100"}, true},
		{map[string]string{"flags": "s_down,slave", "slave-priority": "100"}, false},
		{map[string]string{"flags": "slave,o_down", "slave-priority": "100"}, false},
		{map[string]string{"flags": "slave", "slave-priority": "0"}, false},
		{map[string]string{"flags": "slave", "replica-priority": "0"}, false},
		{map[string]string{"flags": "slave"}, true},
	} {
		if got := sentinelMayPromote(c.r); got != c.want {
			t.Errorf("sentinelMayPromote(%v) = %v; want %v", c.r, got, c.want)
		}
	}
}

// INFO replication as WaitAllReplicas reads it: the master's offset, and
// the replicas with a listening port; a backup (port=0) is none.
func TestReadReplication(t *testing.T) {
	cmd := redis.NewStringCmd(context.Background())
	cmd.SetVal("# Replication\r\nrole:master\r\nconnected_slaves:3\r\n" +
		"slave0:ip=10.0.0.1,port=6379,state=online,offset=120,lag=0\r\n" +
		"slave1:ip=::1,port=6380,state=wait_bgsave,offset=0,lag=0\r\n" +
		"slave2:ip=10.0.0.9,port=0,state=wait_bgsave,offset=0,lag=0\r\n" +
		"master_repl_offset:120\r\n")
	r, err := readReplication(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if r.offset != 120 || len(r.replicas) != 2 || r.replicas["10.0.0.1:6379"] != (attached{"online", 120}) || r.replicas["[::1]:6380"].state != "wait_bgsave" {
		t.Fatalf("read %+v", r)
	}
	need := map[string]bool{"10.0.0.1:6379": true, "[::1]:6380": true, "10.0.0.2:6379": true}
	if got := r.lacking(need, 120); len(got) != 2 || got[0] != "10.0.0.2:6379" || got[1] != "[::1]:6380" {
		t.Fatalf("lacking %v", got)
	}
	if got := r.detached(r.lacking(need, 120)); len(got) != 1 || got[0] != "10.0.0.2:6379" {
		t.Fatalf("detached %v", got)
	}
	cmd.SetVal("# Replication\r\nrole:slave\r\n")
	if _, err := readReplication(cmd); err == nil {
		t.Fatal("INFO without master_repl_offset read without an error")
	}
}

// Which nodes a Cluster master's CLUSTER NODES makes a write wait for:
// its replicas and theirs, and the replicas of a failed master without
// slots; not other masters' replicas, nor a node without an address or in
// its handshake, nor a backup's port 0; one flagged failed is listed as
// not promotable.
func TestClusterReplicasFromClusterNodes(t *testing.T) {
	const nodes = `m1 10.0.0.1:6379@16379 myself,master - 0 0 7 connected 0-5460
r1 10.0.0.2:6379@16379 slave m1 0 0 7 connected
r2 10.0.0.3:6379@16379,host-r2 slave r1 0 0 7 connected
rf 10.0.0.4:6379@16379 slave,fail m1 0 0 7 disconnected
rp 10.0.0.5:6379@16379 slave,fail? m1 0 0 7 connected
m2 10.0.1.1:6379@16379 master - 0 0 8 connected 5461-10922
o2 10.0.1.2:6379@16379 slave m2 0 0 8 connected
dead 10.0.2.1:6379@16379 master,fail - 0 0 3 disconnected
orphan 10.0.2.2:6379@16379 slave dead 0 0 3 connected
empty 10.0.3.1:6379@16379 master - 0 0 0 connected
spare 10.0.3.2:6379@16379 slave empty 0 0 0 connected
hs 10.0.4.1:6379@16379 slave,handshake m1 0 0 0 connected
na :0@0 slave,noaddr m1 0 0 0 disconnected
`
	got, err := clusterReplicas(nodes)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{
		"10.0.0.2:6379": true, "10.0.0.3:6379": true, "10.0.0.4:6379": false,
		"10.0.0.5:6379": true, "10.0.2.2:6379": true,
	}
	if !maps.Equal(got, want) {
		t.Fatalf("got %v; want %v", got, want)
	}
	for _, bad := range []string{"m1 10.0.0.1:6379@16379 master - 0 0 7 connected 0-5460\n", "m1 10.0.0.1:6379 myself\n"} {
		if _, err := clusterReplicas(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// A reply a hostile server shapes (a chain of 30,000 replicas, each
// following the next, as a 512 KiB CLUSTER NODES can hold; a loop that no
// real view has) is read in one walk per node: the chain's replicas all
// count, the loop's none, and the call returns.
func TestClusterReplicasReadsALongChainAndALoopOnce(t *testing.T) {
	const n = 30_000
	var b strings.Builder
	b.WriteString("self 10.0.0.1:6379@16379 myself,master - 0 0 1 connected 0-16383\n")
	for i := range n {
		master := "self"
		if i > 0 {
			master = fmt.Sprint("c", i-1)
		}
		fmt.Fprintf(&b, "c%d 10.1.%d.%d:6379@16379 slave %s 0 0 1 connected\n", i, i/256, i%256, master)
	}
	b.WriteString("l1 10.2.0.1:6379@16379 slave l2 0 0 1 connected\nl2 10.2.0.2:6379@16379 slave l1 0 0 1 connected\n")
	got, err := clusterReplicas(b.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n || !got["10.1.117.47:6379"] {
		t.Fatalf("%d replicas counted; want the chain's %d, and no node of the loop", len(got), n)
	}
}
