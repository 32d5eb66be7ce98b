package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/redislock/redislock/internal/agent"
	"github.com/redislock/redislock/internal/leaderhttp"
	"github.com/redislock/redislock/internal/testing/proc"
	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/internal/testing/rung"
)

// TestThreeAgentsOneLeaderThroughFaults runs three `redislock agent`
// processes on one RedisLock, each as a user that has only the
// redislock-agent role, against a real Redis and the envtest API server. A
// poller outside them samples every /leader every 5ms. Through a SIGKILL, a
// SIGSTOP longer than the ttl, a paused Redis, a Redis restart without
// persistence and a SIGTERM, no two agents ever answer 200 for overlapping
// instants (S1 at the endpoint), a leader is back after each fault, and the
// pod labels follow the leader.
func TestThreeAgentsOneLeaderThroughFaults(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{Password: "agent-pass"})
	startController(t, nil)
	ns := newNamespace(t)
	applyRedisLock(t, ns, "worker", s, "agent-pass", faultTiming)
	kubeconfig := agentUser(t, ns)

	fl, ids, p := startAgents(t, ns, "worker", kubeconfig)
	ttl := faultTiming.lease

	// The Redis just started: the restart guard grants the lock after it has
	// been up for a ttl.
	leader := p.waitLeader(t, "", 3*ttl+5*time.Second)
	t.Logf("first leader: %s", leader)
	waitLabels(t, ns, leader, ids)
	waitLeaderFile(t, fl, leader)
	checkEndpoints(t, fl, ns, leader)
	p.steady(t, time.Second)

	// SIGKILL: the key expires, another agent leads within about a ttl.
	killed := leader
	at := time.Now()
	fl.signal(killed, syscall.SIGKILL)
	leader = p.waitLeader(t, killed, ttl+5*time.Second)
	t.Logf("SIGKILL %s: %s leads after %v", killed, leader, p.firstLead(leader, at).Sub(at).Round(time.Millisecond))
	fl.start(killed, fl.procs[killed].addr) // its container restarts
	waitLabels(t, ns, leader, ids)
	p.steady(t, time.Second)

	// SIGSTOP for longer than the ttl: another agent takes over; the
	// stopped one answers 503 from its first answer after SIGCONT.
	stopped := leader
	at = time.Now()
	fl.signal(stopped, syscall.SIGSTOP)
	leader = p.waitLeader(t, stopped, ttl+5*time.Second)
	waitUntil(t, 10*time.Second, "SIGSTOP to last longer than the ttl", func() bool { return time.Since(at) > ttl+time.Second })
	cont := time.Now()
	fl.signal(stopped, syscall.SIGCONT)
	first := p.waitAnswer(t, stopped, cont, 10*time.Second)
	if first.code != http.StatusServiceUnavailable || first.st.Leading {
		t.Errorf("first answer of %s after SIGCONT: %d %+v, want 503", stopped, first.code, first.st)
	}
	t.Logf("SIGSTOP %s: %s leads; after SIGCONT %s answers %d", stopped, leader, stopped, first.code)
	waitLabels(t, ns, leader, ids)
	p.steady(t, time.Second)

	// Redis paused: the leader cannot renew, and answers 503 from its
	// step-down deadline on, though nothing tells it so.
	paused := time.Now()
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	down := p.waitNotLeading(t, leader, paused, faultTiming.renew+2*time.Second)
	if last := p.lastLead(leader); !last.IsZero() && !last.Before(paused.Add(faultTiming.renew)) {
		t.Errorf("%s answered 200 for %v, later than renewDeadline %v after Redis was paused", leader, last.Sub(paused), faultTiming.renew)
	}
	t.Logf("Redis paused: %s answers 503 from %v after (renewDeadline %v)", leader, down.Sub(paused).Round(time.Millisecond), faultTiming.renew)
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	leader = p.waitLeader(t, "", 2*ttl+5*time.Second)
	waitLabels(t, ns, leader, ids)
	p.steady(t, time.Second)

	// Redis restarted without persistence: the holder steps down at its
	// next renewal, and the restart guard grants nobody the lock for a ttl.
	restarted, old := time.Now(), leader
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	down = p.waitNotLeading(t, old, restarted, faultTiming.renew+2*time.Second)
	leader = p.waitLeader(t, "", 3*ttl+5*time.Second)
	if g := p.firstLead(leader, down).Sub(restarted); g < ttl {
		t.Errorf("%s led %v after the Redis restart, before the ttl %v", leader, g, ttl)
	}
	t.Logf("Redis restart: %s steps down after %v", old, down.Sub(restarted).Round(time.Millisecond))
	t.Logf("Redis restart: %s leads after %v", leader, p.firstLead(leader, down).Sub(restarted).Round(time.Millisecond))
	waitLabels(t, ns, leader, ids)
	p.steady(t, time.Second)

	// SIGTERM: the agent releases the lock and exits; another leads at once.
	termed := leader
	at = time.Now()
	fl.signal(termed, syscall.SIGTERM)
	if err := fl.waitExit(termed, 10*time.Second); err != nil {
		t.Errorf("%s after SIGTERM: %v", termed, err)
	}
	leader = p.waitLeader(t, termed, 5*time.Second)
	handover := p.firstLead(leader, at).Sub(at)
	t.Logf("SIGTERM %s: %s leads after %v", termed, leader, handover.Round(time.Millisecond))
	if handover > time.Second {
		t.Errorf("graceful handover took %v, want well under the ttl %v", handover, ttl)
	}
	rest := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return id == termed })
	waitLabels(t, ns, leader, rest)
	if out := mustKubectl(t, "get", "pod", "-n", ns, termed, "-o", "jsonpath={.metadata.labels.redislock\\.io/leader}"); out != "false" {
		t.Errorf("%s exited with label %s=%q, want false", termed, agent.LeaderLabel, out)
	}

	p.stop()
	p.checkNoOverlap(t)
}

// agentUser adds an API user that has only the redislock-agent ClusterRole
// (config/rbac/agent), bound in ns, and get on the Secrets of ns named
// secrets (redis-auth when none are), each by name as docs/workloads.md
// grants it, and returns its kubeconfig: the agents run with exactly the
// rights the docs tell users to grant.
func agentUser(t *testing.T, ns string, secrets ...string) string {
	t.Helper()
	rung.NeedServers(t)
	applyAgentRole(t)
	name := "agent-" + ns
	user, err := testEnv.AddUser(envtest.User{Name: name}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "agent.kubeconfig")
	if err := os.WriteFile(path, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	mustKubectl(t, "create", "rolebinding", "-n", ns, "redislock-agent", "--clusterrole=redislock-agent", "--user="+name)
	if len(secrets) == 0 {
		secrets = []string{"redis-auth"}
	}
	for _, secret := range secrets {
		mustKubectl(t, "create", "role", secret+"-reader", "-n", ns, "--verb=get", "--resource=secrets", "--resource-name="+secret)
		mustKubectl(t, "create", "rolebinding", "-n", ns, name+"-"+secret, "--role="+secret+"-reader", "--user="+name)
	}
	return path
}

// startAgents creates the pods worker-a, -b and -c in ns, starts an agent
// for each on lock with kubeconfig (and command, the flags and "-- CMD"
// after the others), and a poller of their /leader, stopped when the test
// ends.
func startAgents(t *testing.T, ns, lock, kubeconfig string, command ...string) (*agentFleet, []string, *poller) {
	t.Helper()
	return startAgentsWith(t, ns, lock, kubeconfig, nil, command...)
}

// startAgentsWith is startAgents with, before command, the flags perAgent
// gives each agent (nil: none).
func startAgentsWith(t *testing.T, ns, lock, kubeconfig string, perAgent func(id string) []string, command ...string) (*agentFleet, []string, *poller) {
	t.Helper()
	fl := &agentFleet{t: t, bin: goBuild(t, "."), ns: ns, lock: lock, kubeconfig: kubeconfig, clusterID: clusterIDOf(t, apiServer(t)),
		dir: t.TempDir(), procs: map[string]*agentProc{}, command: command, perAgent: perAgent}
	ids := []string{"worker-a", "worker-b", "worker-c"}
	for _, id := range ids {
		mustKubectl(t, "run", "-n", ns, id, "--image=example.test/worker:1", "--restart=Never")
		fl.start(id, freeAddr(t))
	}
	p := startPoller(fl)
	t.Cleanup(p.stop)
	return fl, ids, p
}

// agentFleet runs agent processes.
type agentFleet struct {
	t                         *testing.T
	bin, ns, lock, kubeconfig string
	clusterID                 string
	command                   []string // flags and "-- CMD ARGS" after the others
	perAgent                  func(id string) []string
	dir                       string
	mu                        sync.Mutex
	procs                     map[string]*agentProc
}

type agentProc struct {
	id, addr string
	*proc.Process
}

func (f *agentFleet) addrs() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := map[string]string{}
	for id, p := range f.procs {
		m[id] = p.addr
	}
	return m
}

func (f *agentFleet) leaderFile(id string) string { return filepath.Join(f.dir, id+".json") }

// start starts the agent id, listening on addr. It is killed when the
// test ends, and its output shown if the test failed.
func (f *agentFleet) start(id, addr string) {
	f.t.Helper()
	p := startProc(f.t, 3072, proc.Options{Name: "agent " + id, Path: f.bin,
		// -cluster-id as the webhook injects it: the agent's own role
		// does not read namespaces.
		Args: slices.Concat([]string{"agent", "-lock=" + f.lock, "-http-address=" + addr, "-label-pod", "-leader-file=" + f.leaderFile(id), "-cluster-id=" + f.clusterID}, f.args(id), f.command),
		Env:  []string{"KUBECONFIG=" + f.kubeconfig, "POD_NAME=" + id, "POD_NAMESPACE=" + f.ns}, Log: filepath.Join(f.dir, id+".log")})
	f.mu.Lock()
	f.procs[id] = &agentProc{id: id, addr: addr, Process: p}
	f.mu.Unlock()
}

// args are the flags of agent id that f.perAgent gives.
func (f *agentFleet) args(id string) []string {
	if f.perAgent == nil {
		return nil
	}
	return f.perAgent(id)
}

func (f *agentFleet) proc(id string) *agentProc {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.procs[id]
}

func (f *agentFleet) signal(id string, sig syscall.Signal) {
	f.t.Helper()
	if err := f.proc(id).Signal(sig); err != nil {
		f.t.Fatalf("signal %v to %s: %v", sig, id, err)
	}
	if sig == syscall.SIGKILL {
		<-f.proc(id).Done()
	}
}

// waitExit waits for id to exit and returns its exit error.
func (f *agentFleet) waitExit(id string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	return f.proc(id).Wait(ctx)
}

// waitLabels waits until the pod leader has the label true and the others
// false.
func waitLabels(t *testing.T, ns, leader string, ids []string) {
	t.Helper()
	var got string
	waitUntil(t, 15*time.Second, "pod labels to show "+leader+" as the leader", func() bool {
		got, _ = kubectl(t, "get", "pods", "-n", ns, "-o", `jsonpath={range .items[*]}{.metadata.name}={.metadata.labels.redislock\.io/leader} {end}`)
		for _, id := range ids {
			want := id + "=false"
			if id == leader {
				want = id + "=true"
			}
			if !slices.Contains(strings.Fields(got), want) {
				return false
			}
		}
		return true
	})
	out := mustKubectl(t, "get", "pods", "-n", ns, "-l", agent.LeaderLabel+"=true", "-o", "name")
	if strings.TrimSpace(out) != "pod/"+leader {
		t.Errorf("kubectl get pods -l %s=true: %q, want pod/%s", agent.LeaderLabel, out, leader)
	}
}

// waitLeaderFile waits until leader's leader file says it leads, with the
// fencing token /leader gives.
func waitLeaderFile(t *testing.T, fl *agentFleet, leader string) {
	t.Helper()
	var st leaderhttp.Status
	waitUntil(t, 10*time.Second, leader+"'s leader file to say it leads", func() bool {
		b, err := os.ReadFile(fl.leaderFile(leader))
		if err != nil || json.Unmarshal(b, &st) != nil {
			return false
		}
		return st.Leading
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	live, _, err := leaderhttp.Get(ctx, "http://"+fl.proc(leader).addr+"/leader")
	if err != nil {
		t.Fatal(err)
	}
	if live.FencingToken != st.FencingToken || st.ValidUntil == nil {
		t.Errorf("leader file %+v, /leader %+v: want the same fencing token and a validUntil", st, live)
	}
}

// checkEndpoints checks the leader's /healthz and that its /metrics say it
// leads.
func checkEndpoints(t *testing.T, fl *agentFleet, ns, leader string) {
	t.Helper()
	get := func(path string) string {
		resp, err := http.Get("http://" + fl.proc(leader).addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
		}
		return string(b)
	}
	if body := get("/healthz"); strings.TrimSpace(body) != "ok" {
		t.Errorf("/healthz: %q", body)
	}
	want := fmt.Sprintf("redislock_agent_leading{redislock=%q} 1", ns+"/"+fl.lock)
	if body := get("/metrics"); !strings.Contains(body, want) || !strings.Contains(body, "redislock_acquire_duration_seconds") {
		t.Errorf("/metrics of the leader lacks %q or the engine's histograms", want)
	}
}

// The agent's role reads no Secret: a pod running as a service account
// bound to redislock-agent, with get on its lock's Secret by name (as
// docs/workloads.md grants), reads that Secret and no other of the
// namespace. Before, the role granted get on every Secret there: a tenant
// who may create pods read, through such an account, a Secret she was
// never given.
func TestAgentRoleReadsOnlyTheSecretsItIsGiven(t *testing.T) {
	ns := newNamespace(t)
	mustKubectl(t, "create", "secret", "generic", "redis-auth", "-n", ns, "--from-literal=password=p")
	mustKubectl(t, "create", "secret", "generic", "payroll", "-n", ns, "--from-literal=token=t")
	kubeconfig := agentUser(t, ns)
	get := func(secret string) (string, error) {
		return kubectl(t, "--kubeconfig="+kubeconfig, "get", "secret", "-n", ns, secret)
	}
	if out, err := get("redis-auth"); err != nil {
		t.Fatalf("the lock's Secret, granted by name: %v\n%s", err, out)
	}
	if out, err := get("payroll"); err == nil || !strings.Contains(out, "forbidden") {
		t.Fatalf("another Secret of the namespace: %v\n%s; want forbidden", err, out)
	}
}
