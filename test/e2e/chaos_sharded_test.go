package e2e

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/redislock/redislock/internal/testing/benchresult"
	"github.com/redislock/redislock/internal/testing/rung"
	"github.com/redislock/redislock/internal/testing/testenv"
	"github.com/redislock/redislock/pkg/mgrsharding"
	"github.com/redislock/redislock/pkg/redislock"
)

// chaosShards and chaosObjects size the sharded chaos run: the 64
// shards over three replicas, and as many ConfigMaps.
const (
	chaosShards  = 64
	chaosObjects = 64
)

// TestShardedChaos runs three replicas of examples/sharded-operator on a
// RedisLock of 64 shards, with its ConfigMaps changing all along, and
// attacks them with random faults for CHAOS_DURATION per Redis deployment
// (single, Sentinel, Cluster; Redlock runs no sharded lock): the replicas
// killed, frozen past the ttl, rolled, scaled up and down, cut off from
// Redis, and Redis restarted, failed over, flushed, its shards' hash
// deleted. From the replicas' logs of reconciles that ended as their
// shard's holder, it must find no ConfigMap reconciled by two replicas at
// overlapping times, no token on two replicas and none going down; from a
// sampler of the shards every 50ms, every shard owned again within the
// bound of the chaos run's L1 after each fault; and at the end every
// ConfigMap annotated by its shard's holder. With SHARDED_CHAOS_JSON set
// it writes the figures there, for test/bench/cmd/benchreport.
func TestShardedChaos(t *testing.T) {
	// Not parallel: in the soak rung it runs before TestChaos's
	// deployments, not beside them, which are timed for two at a time.
	rung.NeedServers(t)
	window, seed := chaosSettings(t)
	bin := buildExample(t, filepath.Join(repoRoot, shardedOperatorDir))
	bins := chaosBinaries{sharded: bin}
	deployments := []func(*testing.T, *chaosRun) chaosBackend{singleBackend, sentinelBackend, clusterBackend}
	names := []string{"single", "sentinel", "cluster"}
	res := benchresult.ShardedChaos{Shards: chaosShards, Window: window.String(), Timing: benchresult.Timing{
		LeaseDuration: faultTiming.lease.String(), RenewDeadline: faultTiming.renew.String(), RetryPeriod: faultTiming.retry.String(),
	}}
	for i, deployment := range deployments {
		rng := rand.New(rand.NewPCG(seed, uint64(100+i)))
		t.Run(names[i], func(t *testing.T) {
			res.Deployments = append(res.Deployments, runShardedChaos(t, names[i], deployment, bins, window, rng))
		})
	}
	var rows []string
	for _, d := range res.Deployments {
		var unowned []string
		for _, k := range slices.Sorted(maps.Keys(d.UnownedSeconds)) {
			unowned = append(unowned, fmt.Sprintf("%s %v", k, time.Duration(d.UnownedSeconds[k]*float64(time.Second)).Round(10*time.Millisecond)))
		}
		rows = append(rows, fmt.Sprintf("%-9s %6d %10d %9d %8d  %s", d.Name, d.Faults, d.Reconciles, d.Overlaps, d.TokenFaults, strings.Join(unowned, ", ")))
	}
	t.Logf("sharded chaos summary (%d shards, ttl %v; unowned: the longest time some shard had no holder after a fault, by kind):\n%-9s %6s %10s %9s %8s  %s\n%s",
		chaosShards, faultTiming.lease, "backend", "faults", "reconciles", "overlaps", "tokens", "unowned", strings.Join(rows, "\n"))
	if path := os.Getenv("SHARDED_CHAOS_JSON"); path != "" && len(res.Deployments) == len(deployments) {
		writeJSON(t, path, res)
	}
}

// shardSample is what the sampler saw of the shards at one instant: how
// many had no holder, -1 when Redis did not answer.
type shardSample struct {
	at      time.Time
	unowned int
}

func runShardedChaos(t *testing.T, name string, deployment func(*testing.T, *chaosRun) chaosBackend, bins chaosBinaries, window time.Duration, rng *rand.Rand) benchresult.ShardedChaosDeployment {
	r := &chaosRun{t: t, bins: bins, ns: newNamespace(t), dir: t.TempDir(), procs: map[string]*chaosCandidate{}, retired: map[string]bool{}}
	b := deployment(t, r)
	manifest := fmt.Sprintf("apiVersion: redislock.io/v1alpha1\nkind: RedisLock\nmetadata:\n  name: chaos\nspec:\n  shards: %d\n  ttl: %s\n  renewDeadline: %s\n  renewInterval: %s\n  redis:\n%s",
		chaosShards, faultTiming.lease, faultTiming.renew, faultTiming.retry, b.spec)
	if out, err := kubectlIn(t, manifest, "apply", "-n", r.ns, "-f", "-"); err != nil {
		t.Fatalf("apply RedisLock: %v\n%s", err, out)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", adminKubeconfig(t))
	if err != nil {
		t.Fatal(err)
	}
	k8s, err := testenv.Client(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range chaosObjects {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: fmt.Sprintf("cm-%02d", i), Labels: map[string]string{"example.com/sharded": "true"}}}
		if err := k8s.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	lc, err := redislock.New([]redis.UniversalClient{b.client}, &redislock.Options{AssumeDurable: true})
	if err != nil {
		t.Fatal(err)
	}
	lockName := lockIn(t, r.ns) + "/chaos"
	for i := range 3 {
		r.start(fmt.Sprintf("op-%d", i), "sharded", freeAddr(t))
	}
	t.Cleanup(r.stopAll)

	// The sampler, and the ConfigMaps changing.
	var mu sync.Mutex
	var samples []shardSample
	var last redislock.ShardsView
	run, stop := context.WithCancel(ctx)
	var bg sync.WaitGroup
	bg.Go(func() {
		for run.Err() == nil {
			v, err := lc.InspectShards(run, lockName, chaosShards)
			s := shardSample{at: time.Now(), unowned: -1}
			if err == nil {
				s.unowned = chaosShards - v.Held()
			}
			mu.Lock()
			samples = append(samples, s)
			if err == nil {
				last = v
			}
			mu.Unlock()
			pause(50 * time.Millisecond) // the sampling period
		}
	})
	bg.Go(func() {
		for i := 0; run.Err() == nil; i++ {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: fmt.Sprintf("cm-%02d", i%chaosObjects)}}
			_ = k8s.Patch(run, cm, client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"data":{"tick":"%d"}}`, i)))
			pause(20 * time.Millisecond) // the pace of changes
		}
	})
	defer func() { stop(); bg.Wait() }()
	owned := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(samples) > 0 && samples[len(samples)-1].unowned == 0
	}
	waitUntil(t, time.Minute, "the three replicas to own every shard", owned)

	faults := map[string]func(*rand.Rand) string{
		"kill": r.killAndRestart,
		"stop": r.stopPastTTL,
		// A rollout's step: SIGTERM (the shards handed over at once),
		// and the pod back.
		"rolling": func(rng *rand.Rand) string {
			c := r.pick(rng)
			_ = c.Signal(syscall.SIGTERM)
			return c.id
		},
		// Scale up by one for a ttl, then back down.
		"scale": func(*rand.Rand) string {
			r.mu.Lock()
			r.retired["op-extra"] = false
			r.mu.Unlock()
			r.start("op-extra", "sharded", freeAddr(t))
			pause(faultTiming.lease)
			r.mu.Lock()
			c := r.procs["op-extra"]
			r.retired["op-extra"] = true
			r.mu.Unlock()
			_ = c.Signal(syscall.SIGTERM)
			<-c.Done()
			r.mu.Lock()
			delete(r.procs, "op-extra")
			r.mu.Unlock()
			return "op-extra"
		},
		"del-shards": func(rng *rand.Rand) string {
			for _, i := range rng.Perm(len(b.nodes)) {
				c := b.nodes[i].Client()
				err := c.Del(ctx, "redislock:{"+lockName+"}:shards").Err()
				_ = c.Close()
				if err == nil {
					return b.nodes[i].Addr
				}
			}
			t.Errorf("DEL of the shards' hash: no node took it")
			return ""
		},
	}
	if len(b.proxies) > 0 {
		faults["cut"] = func(rng *rand.Rand) string { return r.netFault(rng, b.proxies, "cut") }
	}
	for k, f := range b.faults {
		// A fresh failover waits for a new single leader: none here.
		if !strings.HasPrefix(k, "fresh-") {
			faults[k] = f
		}
	}
	faults["flush"] = r.redisSideFaults(b.nodes)["flush"]
	done := injectFaults(t, faults, window, rng, func() {
		waitUntil(t, 3*faultTiming.lease+30*time.Second, "every shard owned after the fault", owned)
		pause(faultTiming.lease)
		waitUntil(t, 3*faultTiming.lease+30*time.Second, "every shard owned a ttl after the fault", owned)
	})
	settle := time.Now()
	// At the end, every ConfigMap names its shard's holder, with the token.
	var why string
	waitUntil(t, time.Minute, "every ConfigMap annotated by its shard's holder", func() bool {
		mu.Lock()
		v := last
		mu.Unlock()
		var cms corev1.ConfigMapList
		if err := k8s.List(ctx, &cms, client.InNamespace(r.ns)); err != nil || len(v.Shards) != chaosShards {
			why = fmt.Sprint(err)
			return false
		}
		for _, cm := range cms.Items {
			i := mgrsharding.ShardOf(cm.Namespace, cm.Name, chaosShards)
			if want := fmt.Sprintf("%s/%d/%d", v.Shards[i].Identity, i, v.Shards[i].Fence); cm.Annotations["example.com/reconciled-by"] != want {
				why = fmt.Sprintf("%s annotated %q, want %q", cm.Name, cm.Annotations["example.com/reconciled-by"], want)
				return false
			}
		}
		return true
	})
	stop()
	bg.Wait()
	r.stopAll()
	if t.Failed() {
		t.Log("last:", why)
	}

	r.mu.Lock()
	all := slices.Clone(r.reconciles)
	r.mu.Unlock()
	bad := reconcileFaults(all)
	overlaps, tokens := 0, 0
	for _, f := range bad {
		if strings.Contains(f, " reconciled by ") {
			overlaps++
		} else {
			tokens++
		}
		t.Error(f)
	}
	// The longest stretch, after each fault and before the next, with
	// some shard unowned (or Redis not answering the sampler).
	worst := map[string]time.Duration{}
	for i, f := range done {
		next := settle
		if i+1 < len(done) {
			next = done[i+1].at
		}
		var from time.Time
		gap := time.Duration(0)
		for _, s := range samples {
			if s.at.Before(f.at) || s.at.After(next) {
				continue
			}
			switch {
			case s.unowned != 0 && from.IsZero():
				from = s.at
			case s.unowned == 0 && !from.IsZero():
				gap = max(gap, s.at.Sub(from))
				from = time.Time{}
			}
		}
		worst[f.kind] = max(worst[f.kind], gap)
		if limit := chaosL1Bound(f); gap > limit {
			t.Errorf("a shard unowned for %v after the %s fault on %s at %s; the bound is %v", gap.Round(time.Millisecond), f.kind, f.target, clock(f.at), limit)
		}
	}
	d := benchresult.ShardedChaosDeployment{Name: name, Faults: len(done), Reconciles: len(all), Overlaps: overlaps, TokenFaults: tokens, UnownedSeconds: map[string]float64{}}
	for k, g := range worst {
		d.UnownedSeconds[k] = g.Seconds()
	}
	return d
}
