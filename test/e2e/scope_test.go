package e2e

import (
	"context"
	"fmt"
	"maps"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/internal/testing/rung"
	"github.com/redislock/redislock/internal/testing/testenv"
)

// A second cluster, its own API server and etcd, beside the test's.
type otherCluster struct {
	env     *envtest.Environment
	kubectl testenv.Kubectl
}

// startOtherCluster starts a second control plane with the CRD, stopped
// when the test ends.
func startOtherCluster(t *testing.T) *otherCluster {
	t.Helper()
	rung.NeedServers(t)
	env := &envtest.Environment{
		BinaryAssetsDirectory:    testEnv.BinaryAssetsDirectory,
		CRDDirectoryPaths:        []string{filepath.Join(repoRoot, "config", "crd", "bases")},
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: testenv.ControlPlaneStartTimeout,
		ControlPlaneStopTimeout:  time.Minute,
	}
	if _, err := env.Start(); err != nil {
		t.Fatalf("a second control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop the second control plane: %v", err)
		}
	})
	k, err := testenv.AdminKubectl(env, "e2e-admin-b", t.TempDir(), repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	return &otherCluster{env: env, kubectl: k}
}

// clusterSide is one cluster as the test uses it: how to run kubectl in
// it, its kubeconfig and identity, and the prefix of its candidates' ids.
type clusterSide struct {
	prefix     string
	kubectl    func(args ...string) (string, error)
	kubeconfig string
	clusterID  string
}

func (c clusterSide) must(t *testing.T, args ...string) {
	t.Helper()
	if out, err := c.kubectl(args...); err != nil {
		t.Fatalf("%s: kubectl %v: %v\n%s", c.prefix, args, err, out)
	}
}

// bothClusters returns the test's cluster (candidates "a-…") and a second
// one ("b-…"), each with the namespace ns.
func bothClusters(t *testing.T) (ns string, sides []clusterSide, other *otherCluster) {
	t.Helper()
	ns = newNamespace(t)
	other = startOtherCluster(t)
	a := clusterSide{prefix: "a", kubectl: func(args ...string) (string, error) { return kubectl(t, args...) },
		kubeconfig: adminKubeconfig(t), clusterID: clusterIDOf(t, apiServer(t))}
	b := clusterSide{prefix: "b", kubectl: func(args ...string) (string, error) { return other.kubectl.Run(context.Background(), "", args...) },
		kubeconfig: other.kubectl.Kubeconfig, clusterID: clusterIDOf(t, other.env.Config)}
	if a.clusterID == b.clusterID {
		t.Fatalf("both clusters have the identity %s", a.clusterID)
	}
	b.must(t, "create", "namespace", ns)
	return ns, []clusterSide{a, b}, other
}

// scopedLock applies in side's ns the RedisLock name on addrs (Redlock
// when more than one) with scope and lockName ("" leaves them out).
func (c clusterSide) scopedLock(t *testing.T, ns, name, scope, lockName string, addrs []string) {
	t.Helper()
	mode := "Standalone"
	if len(addrs) > 1 {
		mode = "Redlock"
	}
	extra := ""
	if scope != "" {
		extra += "\n  scope: " + scope
	}
	if lockName != "" {
		extra += "\n  lockName: " + lockName
	}
	manifest := filepath.Join(t.TempDir(), c.prefix+"-"+name+".yaml")
	yaml := fmt.Sprintf(`apiVersion: redislock.io/v1alpha1
kind: RedisLock
metadata:
  name: %s
  namespace: %s
spec:%s
  ttl: 3s
  renewInterval: 500ms
  renewDeadline: 2s
  redis:
    mode: %s
    addrs: ["%s"]
    nodeTimeout: 300ms
`, name, ns, extra, mode, strings.Join(addrs, `", "`))
	if err := os.WriteFile(manifest, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	c.must(t, "apply", "-f", manifest)
}

// agents starts n agents of side on lock ns/name, with pods for them to
// label, and returns their fleet.
func (c clusterSide) agents(t *testing.T, ns, name string, n int) *agentFleet {
	t.Helper()
	fl := &agentFleet{t: t, bin: goBuild(t, "."), ns: ns, lock: name, kubeconfig: c.kubeconfig, clusterID: c.clusterID, dir: t.TempDir(), procs: map[string]*agentProc{}}
	for i := range n {
		id := fmt.Sprintf("%s-%s-%d", c.prefix, name, i)
		c.must(t, "run", "-n", ns, id, "--image=example.test/worker:1", "--restart=Never")
		fl.start(id, freeAddr(t))
	}
	return fl
}

// fleets are the agents of several clusters, as one set of candidates.
type fleets []*agentFleet

func (fs fleets) addrs() map[string]string {
	m := map[string]string{}
	for _, f := range fs {
		for id, addr := range f.addrs() {
			m[id] = addr
		}
	}
	return m
}

// of returns the fleet that runs id.
func (fs fleets) of(id string) *agentFleet {
	for _, f := range fs {
		if f.proc(id) != nil {
			return f
		}
	}
	return nil
}

// Two clusters that share one Redis (or one Redlock) and each declare a
// RedisLock of the same namespace and name: by default each elects its own
// leader, because the lock is scoped to its cluster; with scope Global and
// one lockName, exactly one candidate of either cluster leads, through
// kills, pauses past the ttl and one cluster's API server going away (the
// checker's S1 on /leader, and S3 on the fencing tokens).
func TestLockScopeAcrossClusters(t *testing.T) {
	backends := map[string]int{"single": 1, "redlock": 3}
	for _, backend := range []string{"single", "redlock"} {
		t.Run(backend, func(t *testing.T) {
			var addrs []string
			for range backends[backend] {
				addrs = append(addrs, redistest.Start(t, redisproc.Options{}).Addr)
			}
			ns, sides, other := bothClusters(t)

			// Scope Cluster, the default: one leader in each cluster.
			var local fleets
			for _, c := range sides {
				c.scopedLock(t, ns, "orders", "", "", addrs)
				local = append(local, c.agents(t, ns, "orders", 2))
			}
			p := startPoller(local)
			waitUntil(t, 30*time.Second, "a leader in each cluster", func() bool {
				l := slices.Sorted(slices.Values(p.leaders()))
				return len(l) == 2 && strings.HasPrefix(l[0], "a-") && strings.HasPrefix(l[1], "b-")
			})
			p.stop()
			t.Logf("scope Cluster: leaders %v", p.leaders())

			// Scope Global: one leader across both.
			var global fleets
			for _, c := range sides {
				c.scopedLock(t, ns, "orders-global", "Global", "orders", addrs)
				global = append(global, c.agents(t, ns, "orders-global", 2))
			}
			p = startPoller(global)
			defer p.stop()
			waitUntil(t, 30*time.Second, "one leader across both clusters", func() bool { return len(p.leaders()) == 1 })
			faults := globalFaults(t, global, p, other)
			rng := rand.New(rand.NewSource(time.Now().UnixNano()))
			var log []string
			for _, f := range []string{"kill", "pause", "api-b", "kill", "pause"} {
				log = append(log, faults[f](rng))
			}
			waitUntil(t, 30*time.Second, "one leader after the faults", func() bool { return len(p.leaders()) == 1 })
			p.stop()
			t.Logf("faults: %s", strings.Join(log, "; "))
			p.checkNoOverlap(t)
			spans, _, _, _ := p.terms()
			if r := regressions(spans); len(r) > 0 {
				t.Errorf("S3 broken: %d fencing tokens not above the last term's:\n  %s", len(r), strings.Join(r, "\n  "))
			}
			clusters := map[string]bool{}
			for _, s := range spans {
				clusters[s.id[:1]] = true
			}
			t.Logf("scope Global: %d terms, led from clusters %v", len(spans), slices.Sorted(maps.Keys(clusters)))
		})
	}
}

// globalFaults are the faults of TestLockScopeAcrossClusters, each done
// to the leader of the moment and returning what it did once the fleet
// has a leader again.
func globalFaults(t *testing.T, fs fleets, p *poller, other *otherCluster) map[string]func(*rand.Rand) string {
	leader := func() string {
		var l []string
		waitUntil(t, 30*time.Second, "a leader", func() bool { l = p.leaders(); return len(l) == 1 })
		return l[0]
	}
	return map[string]func(*rand.Rand) string{
		// SIGKILL: the lock runs out at the ttl; the agent comes back.
		"kill": func(*rand.Rand) string {
			id := leader()
			fl := fs.of(id)
			addr := fl.proc(id).addr
			fl.signal(id, syscall.SIGKILL)
			fl.start(id, addr)
			return "killed " + id + ", " + leader() + " leads"
		},
		// SIGSTOP past the ttl: a candidate takes over while the old
		// leader sleeps, and it must find out it lost once it resumes.
		"pause": func(rng *rand.Rand) string {
			id := leader()
			fl := fs.of(id)
			fl.signal(id, syscall.SIGSTOP)
			pause(3*time.Second + time.Duration(rng.Int63n(int64(2*time.Second))))
			fl.signal(id, syscall.SIGCONT)
			return "paused " + id + ", " + leader() + " leads"
		},
		// Cluster b's API server away for 15s: its agents keep campaigning
		// on Redis, and a standby of either cluster may take over if the
		// leader is killed meanwhile.
		"api-b": func(*rand.Rand) string {
			resume := stopAPIServer(t, other.env)
			id := leader()
			fl := fs.of(id)
			addr := fl.proc(id).addr
			fl.signal(id, syscall.SIGKILL)
			next := leader()
			pause(15 * time.Second)
			resume()
			fl.start(id, addr)
			return "API server b stopped 15s, killed " + id + ", " + next + " led"
		},
	}
}
