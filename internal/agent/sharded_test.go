package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"k8s.io/apimachinery/pkg/types"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/internal/leaderhttp"
	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/pkg/redislock"
)

// shardedLock creates a RedisLock of shards shards on a new redis-server
// in a new namespace, and returns it with the server, once the restart
// guard lets grants through.
func shardedLock(t *testing.T, shards int32) (types.NamespacedName, *redisproc.Server) {
	t.Helper()
	lock, srv := lockOnNewServer(t, "agent-shards-", func(rl *v1alpha1.RedisLock) { rl.Spec.Shards = &shards })
	redistest.WaitUp(t, 2*time.Second, srv) // the restart guard
	return lock, srv
}

// runShardAgent runs an agent of o on lock as identity until t ends (or stop),
// with a free address, and returns its /leader URL.
func runShardAgent(t *testing.T, lock types.NamespacedName, identity string, o Options) (url string, stop func()) {
	t.Helper()
	o.Lock, o.Identity, o.ClusterID = lock, identity, "test-cluster"
	o.Addr = "127.0.0.1:" + freePort(t)
	a, err := New(restConfig, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- a.Run(ctx) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-ran; err != nil {
				t.Errorf("agent %s: %v", identity, err)
			}
		}
	}
	t.Cleanup(stop)
	return "http://" + o.Addr + "/leader", stop
}

// shardsOf is the /leader answer at url and its shard indexes.
func shardsOf(url string) (leaderhttp.Status, []int) {
	st, _, err := leaderhttp.Get(context.Background(), url)
	if err != nil {
		return st, nil
	}
	var idx []int
	for _, s := range st.Shards {
		idx = append(idx, s.Index)
	}
	return st, idx
}

// hookScript writes a hook that appends its stdin to log and, while block
// exists, waits (for at most 30s).
func hookScript(t *testing.T, dir, log, block string) string {
	t.Helper()
	path := filepath.Join(dir, "hook.sh")
	script := fmt.Sprintf("#!/bin/sh\ncat >> %s\ni=0\nwhile [ -e %s ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done\n", log, block)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// Agents on a sharded RedisLock share its shards out, and each tells its
// app which it holds, with their tokens, in /leader (200 while it holds
// one), the file and the hook; a shard that moves away is dropped from
// /leader at once, but handed over only once the hook's run that reports
// it gone has returned.
func TestAgentsShareTheShardsAndTellTheApp(t *testing.T) {
	lock, srv := shardedLock(t, 8)
	dir := t.TempDir()
	type app struct{ url, file, log, block string }
	apps := map[string]*app{}
	for _, id := range []string{"pod-a", "pod-b", "pod-c"} {
		d := filepath.Join(dir, id)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		apps[id] = &app{file: filepath.Join(d, "leader.json"), log: filepath.Join(d, "hook.log"), block: filepath.Join(d, "block")}
	}
	start := func(id string) func() {
		ap := apps[id]
		var stop func()
		ap.url, stop = runShardAgent(t, lock, id, Options{LeaderFile: ap.file, Hook: hookScript(t, filepath.Dir(ap.file), ap.log, ap.block)})
		return stop
	}
	// balanced: the ids' /leader answers hold every shard between them,
	// each one once, at most ⌈8/n⌉ and at least ⌊8/n⌋ each.
	balanced := func(ids ...string) bool {
		var all []int
		for _, id := range ids {
			st, idx := shardsOf(apps[id].url)
			if st.ShardCount != 8 || len(idx) < 8/len(ids) || len(idx) > (8+len(ids)-1)/len(ids) || st.Leading != (len(idx) > 0) {
				return false
			}
			all = append(all, idx...)
		}
		slices.Sort(all)
		return slices.Equal(all, []int{0, 1, 2, 3, 4, 5, 6, 7})
	}
	start("pod-a")
	start("pod-b")
	waitFor(t, 30*time.Second, "a and b to hold 4 shards each", func() bool { return balanced("pod-a", "pod-b") })

	// The file and the hook say what /leader says.
	for _, id := range []string{"pod-a", "pod-b"} {
		ap := apps[id]
		want, _ := shardsOf(ap.url)
		waitFor(t, 10*time.Second, id+"'s file and hook to name its shards", func() bool {
			var file leaderhttp.Status
			b, err := os.ReadFile(ap.file)
			if err != nil || json.Unmarshal(b, &file) != nil || shardsKey(file) != shardsKey(want) {
				return false
			}
			log, err := os.ReadFile(ap.log)
			lines := strings.Split(strings.TrimSpace(string(log)), "\n")
			var last leaderhttp.Status
			return err == nil && json.Unmarshal([]byte(lines[len(lines)-1]), &last) == nil && shardsKey(last) == shardsKey(want)
		})
		for _, s := range want.Shards {
			if s.FencingToken <= 0 || !s.ValidUntil.After(want.ObservedAt) {
				t.Fatalf("%s's shard %+v: want a token and a validity past %v", id, s, want.ObservedAt)
			}
		}
	}

	// a's hook blocks: c joins, and b's surplus shard moves to c while
	// a's, which /leader no longer lists, stays a's in Redis.
	if err := os.WriteFile(apps["pod-a"].block, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	lc, err := redislock.New([]redis.UniversalClient{srv.Client()}, &redislock.Options{AssumeDurable: true})
	if err != nil {
		t.Fatal(err)
	}
	name := "test-cluster/" + lock.Namespace + "/" + lock.Name
	held := func(id string) int {
		v, err := lc.InspectShards(context.Background(), name, 8)
		if err != nil {
			return -1
		}
		n := 0
		for _, s := range v.Shards {
			if s.Identity == id {
				n++
			}
		}
		return n
	}
	start("pod-c")
	waitFor(t, 30*time.Second, "c to hold b's surplus, a to list 3 shards at most", func() bool {
		_, a := shardsOf(apps["pod-a"].url)
		return held("pod-c") >= 1 && held("pod-b") <= 3 && len(a) <= 3
	})
	if n := held("pod-a"); n != 4 {
		t.Fatalf("a holds %d shards in Redis while its hook has not returned; want its 4", n)
	}
	if err := os.Remove(apps["pod-a"].block); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "a, b and c balanced once a's hook returned", func() bool { return balanced("pod-a", "pod-b", "pod-c") && held("pod-a") <= 3 })
}

// An agent asked to do, for a sharded lock, what applies to one holder
// only (run a command while leading) does not campaign, and says why in
// /leader.
func TestAgentRefusesACommandForASharedLock(t *testing.T) {
	lock, _ := shardedLock(t, 4)
	url, _ := runShardAgent(t, lock, "pod-a", Options{Command: []string{"true"}})
	waitFor(t, 30*time.Second, "/leader to say the lock is sharded", func() bool {
		st, _, err := leaderhttp.Get(context.Background(), url)
		return err == nil && !st.Leading && strings.Contains(st.Error, "is sharded (spec.shards 4)") && strings.Contains(st.Error, "run a command while leading")
	})
}
