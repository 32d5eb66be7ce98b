package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redislock/redislock/internal/testing/proc"
	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/internal/testing/rung"
	"github.com/redislock/redislock/pkg/mgrsharding"
	"github.com/redislock/redislock/pkg/redislock"
)

// shardedOperatorDir is the example of docs/sharding.md: the kubebuilder
// scaffold of examples/operator with a ConfigMap controller sharded by
// pkg/mgrsharding.
const shardedOperatorDir = "examples/sharded-operator"

// TestShardedOperatorExample builds examples/sharded-operator, checks its
// RBAC against its markers, and runs its Deployment's three replicas as
// the service account of its kustomize RBAC on a RedisLock of 64 shards:
// each labelled ConfigMap ends annotated by the replica that holds its
// shard, with the shard's token, while a replica is killed (SIGKILL), one
// is started in its place and another stopped (SIGTERM); no ConfigMap is
// reconciled by two replicas at overlapping times (by their logs), no
// token serves two replicas, unlabelled ConfigMaps are left alone, and no
// request is refused by the RBAC.
func TestShardedOperatorExample(t *testing.T) {
	dir := filepath.Join(repoRoot, shardedOperatorDir)
	bin := buildExample(t, dir)
	t.Run("config/rbac/role.yaml is what controller-gen makes of the markers", func(t *testing.T) {
		roleIsGenerated(t, dir)
	})
	t.Run("three replicas share the ConfigMaps through kills and restarts", func(t *testing.T) {
		shardedOperatorRun(t, dir, bin)
	})
}

func shardedOperatorRun(t *testing.T, dir, bin string) {
	rung.NeedServers(t)
	ns, sa, args := applyOperatorRBAC(t, dir, "redislock/operator-shards", "secret/redis-auth")
	lockNS, lockName, ok := strings.Cut(argValue(args, "--sharding-redislock"), "/")
	if !ok || lockNS != ns {
		t.Fatalf("the Deployment's manager args %q: want --sharding-redislock=<its namespace>/<name>", args)
	}
	const shards = 64
	s := redistest.Start(t, redisproc.Options{Password: "s3cret"})
	d := durations{lease: 3 * time.Second, renew: 2 * time.Second, retry: 500 * time.Millisecond}
	createRedisLockWith(t, ns, lockName, s, "s3cret", d, fmt.Sprintf("  shards: %d\n", shards))
	redistest.WaitUp(t, d.lease, s) // the restart guard
	lc, err := redislock.New(redistest.Clients(t, s), &redislock.Options{AssumeDurable: true})
	if err != nil {
		t.Fatal(err)
	}
	redisName := lockIn(t, ns) + "/" + lockName

	objects := "sharded-objects"
	mustKubectl(t, "create", "namespace", objects)
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "configmaps", "-n", objects, "--all") })
	var cms strings.Builder
	for i := range 96 {
		label := "example.com/sharded: \"true\""
		if i%16 == 0 {
			label = "other: x" // not the operator's
		}
		fmt.Fprintf(&cms, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-%02d, labels: {%s}}\n---\n", i, label)
	}
	if out, err := kubectlIn(t, cms.String(), "apply", "-n", objects, "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}

	kubeconfig := kubeconfigAs(t, ns, sa)
	start := func(id string) *opReplica {
		r := &opReplica{id: id, probe: freeAddr(t), metrics: freeAddr(t)}
		r.p = startProc(t, 8192, proc.Options{Name: id, Path: bin,
			Args: append(slices.Clone(args), "--kubeconfig="+kubeconfig, "--zap-encoder=json",
				"--health-probe-bind-address="+r.probe, "--metrics-bind-address=0"),
			Env: []string{"POD_NAME=" + id},
			Log: filepath.Join(t.TempDir(), id+".log"), Stdout: r.log.add, Stderr: r.log.add})
		if err := r.p.WaitReady(context.Background(), time.Minute, func(context.Context) (bool, error) {
			return httpOK("http://" + r.probe + "/healthz"), nil
		}); err != nil {
			t.Fatal(err)
		}
		return r
	}
	var why string
	defer func() {
		if t.Failed() {
			t.Log("last:", why)
		}
	}()
	// settled: the live replicas hold the shards, balanced, and every
	// labelled ConfigMap names its shard's holder and token.
	settled := func(live ...*opReplica) bool {
		v, err := lc.InspectShards(context.Background(), redisName, shards)
		if err != nil {
			why = err.Error()
			return false
		}
		per := map[string]int{}
		for _, h := range v.Shards {
			per[h.Identity]++
		}
		for _, r := range live {
			if n := per[r.id]; n < shards/len(live) || n > (shards+len(live)-1)/len(live) {
				why = fmt.Sprintf("%s holds %d shards: %v", r.id, n, per)
				return false
			}
		}
		if len(per) != len(live) {
			why = fmt.Sprintf("holders %v", per)
			return false
		}
		out, err := kubectl(t, "get", "configmaps", "-n", objects, "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.metadata.labels.example\.com/sharded} {.metadata.annotations.example\.com/reconciled-by}{"\n"}{end}`)
		if err != nil {
			why = err.Error()
			return false
		}
		for line := range strings.Lines(out) {
			f := strings.Fields(line)
			name, labelled, by := f[0], len(f) > 1 && f[1] == "true", ""
			if len(f) > 2 {
				by = f[2]
			} else if len(f) == 2 && !labelled {
				by = f[1]
			}
			want := ""
			if labelled {
				i := mgrsharding.ShardOf(objects, name, shards)
				want = fmt.Sprintf("%s/%d/%d", v.Shards[i].Identity, i, v.Shards[i].Fence)
			}
			if by != want {
				why = fmt.Sprintf("ConfigMap %s is annotated %q; want %q", name, by, want)
				return false
			}
		}
		return true
	}
	a, b, c := start("sharded-a"), start("sharded-b"), start("sharded-c")
	waitUntil(t, time.Minute, "three replicas to own the labelled ConfigMaps", func() bool { return settled(a, b, c) })

	killed := time.Now()
	if err := b.p.Kill(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, d.lease+time.Minute, "a and c to own b's ConfigMaps after b's SIGKILL", func() bool { return settled(a, c) })
	t.Logf("a and c own b's ConfigMaps %v after its SIGKILL (ttl %v)", time.Since(killed).Round(time.Millisecond), d.lease)

	e := start("sharded-e")
	waitUntil(t, time.Minute, "e, started in b's place, to own its share", func() bool { return settled(a, c, e) })
	stopped := time.Now()
	if err := a.p.Stop(30 * time.Second); err != nil {
		t.Errorf("sharded-a after SIGTERM: %v", err)
	}
	waitUntil(t, time.Minute, "c and e to own a's ConfigMaps after its SIGTERM", func() bool { return settled(c, e) })
	t.Logf("c and e own a's ConfigMaps %v after its SIGTERM", time.Since(stopped).Round(time.Millisecond))

	var all []logged
	for _, r := range []*opReplica{a, b, c, e} {
		if line := r.log.find("forbidden"); line != "" {
			t.Errorf("%s was refused a request by the example's RBAC: %s", r.id, line)
		}
		all = append(all, reconciles(t, r)...)
	}
	for _, f := range reconcileFaults(all) {
		t.Error(f)
	}
	t.Logf("%d reconciles logged, none of one ConfigMap by two replicas at once", len(all))
}

// logged is one "reconciled" line of the sharded operator's log.
type logged struct {
	replica, object, by string
	start, end          time.Time
}

// shardFence is the shard and token of the reconcile: "<shard>/<token>".
func (l logged) shardFence() string {
	_, sf, _ := strings.Cut(l.by, "/")
	return sf
}

// reconciles reads the "reconciled" lines of r's log.
func reconciles(t *testing.T, r *opReplica) []logged {
	t.Helper()
	r.log.mu.Lock()
	defer r.log.mu.Unlock()
	var out []logged
	for _, line := range r.log.lines {
		if l, ok := parseReconciled(r.id, line); ok {
			out = append(out, l)
		}
	}
	return out
}

// parseReconciled reads a "reconciled" line of replica id's JSON log;
// false for any other line. A "reconciled" line it cannot read, or one
// that names another replica, is read as a reconcile of object "?" by
// "?", which the checks report.
func parseReconciled(id, line string) (logged, bool) {
	var l struct {
		Msg, Namespace, Name, By, Start, End string
	}
	if json.Unmarshal([]byte(line), &l) != nil || l.Msg != "reconciled" {
		return logged{}, false
	}
	start, err1 := time.Parse(time.RFC3339Nano, l.Start)
	end, err2 := time.Parse(time.RFC3339Nano, l.End)
	if err1 != nil || err2 != nil || l.Name == "" || !strings.HasPrefix(l.By, id+"/") {
		return logged{replica: id, object: "?", by: "?/" + line}, true
	}
	return logged{replica: id, object: l.Namespace + "/" + l.Name, by: l.By, start: start, end: end}, true
}

// reconcileFaults returns the pairs of reconciles in all of one object
// by two replicas at overlapping times, the tokens that served two
// replicas, the shards whose token went down from one reconcile to a
// later-started one, and the lines that could not be read.
func reconcileFaults(all []logged) []string {
	var out []string
	sorted := slices.SortedFunc(slices.Values(all), func(a, b logged) int { return a.start.Compare(b.start) })
	for i, x := range sorted {
		if x.object == "?" {
			out = append(out, fmt.Sprintf("%s logged a reconcile that cannot be read: %s", x.replica, x.by))
			continue
		}
		for _, y := range sorted[i+1:] {
			if x.replica == y.replica {
				continue
			}
			if x.object == y.object && y.start.Before(x.end) {
				out = append(out, fmt.Sprintf("%s reconciled by %s (%s–%s) and %s (%s–%s)", x.object, x.replica, clock(x.start), clock(x.end), y.replica, clock(y.start), clock(y.end)))
			}
			if x.shardFence() == y.shardFence() {
				out = append(out, fmt.Sprintf("shard/token %s served %s and %s", x.shardFence(), x.replica, y.replica))
			}
		}
	}
	top := map[string]int64{}
	for _, x := range sorted {
		shard, fence, ok := strings.Cut(x.shardFence(), "/")
		f, err := strconv.ParseInt(fence, 10, 64)
		if !ok || err != nil {
			continue
		}
		if f < top[shard] {
			out = append(out, fmt.Sprintf("shard %s: %s reconciled %s at %s with token %d, below the %d of an earlier reconcile", shard, x.replica, x.object, clock(x.start), f, top[shard]))
		}
		top[shard] = max(top[shard], f)
	}
	return out
}
