// Package demo is `make demo`: the whole system on one machine, without a
// cluster. It starts Redis (three nodes, Redlock, or one), a throwaway
// control plane (envtest), the controller with its webhook, three sample
// operators on one RedisLock and the agents the webhook injects into a
// three-pod workload; shows who leads, kills the operators' leader and
// stops the workload's, times both handovers, counts what the election then
// costs each Redis node, and stops everything it started.
package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/redislock/redislock/internal/agentflags"
	"github.com/redislock/redislock/internal/inject"
	"github.com/redislock/redislock/internal/testing/proc"
	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redisstats"
	"github.com/redislock/redislock/internal/testing/testenv"
	"github.com/redislock/redislock/pkg/redislock"
)

// Names of what the demo creates, and how long it counts commands.
const (
	namespace     = "demo"
	operatorLock  = "operator"
	workerLock    = "worker"
	webhookConfig = "redislock-demo-injector"
	rateWindow    = 10 * time.Second
)

// Config is what the demo runs with.
type Config struct {
	// Root is the repository root; config/ is read from there.
	Root string
	// Redislock is the redislock binary (controller and agent).
	Redislock string
	// SampleOperator is the test/e2e/sampleoperator binary.
	SampleOperator string
	// Assets is the directory of kube-apiserver, etcd and kubectl.
	Assets string
	// Redlock runs three Redis nodes and Redlock instead of one node.
	Redlock bool
	// TTL is the locks' ttl; renewDeadline and renewInterval follow it.
	TTL time.Duration
	// Keep keeps everything running after the scenario, until ctx ends.
	Keep bool
	// Live redraws a table each second (for a terminal); otherwise the
	// demo logs each change.
	Live bool
	// Out receives the account.
	Out io.Writer
}

// Result is what the demo measured.
type Result struct {
	// Failover is from the kill -9 of the operators' leader to the
	// instant another replica's /leader answer says it leads.
	Failover time.Duration
	// Handover is from the SIGTERM of the workload's leading agent to the
	// instant another agent's /leader answer says it leads.
	Handover time.Duration
	// PIDs are the processes the demo started, all stopped when Run
	// returns.
	PIDs []int
	// Rates are the commands per second that each Redis node executed
	// over the last 10 s of the scenario, in the order of the nodes.
	Rates []NodeRate
}

// NodeRate is what one Redis node executed per second over a window.
type NodeRate struct {
	// Addr is the node's address.
	Addr string
	// Scripts is script calls (EVALSHA and EVAL): lock operations.
	Scripts float64
	// Publish is PUBLISH calls (release messages).
	Publish float64
	// Total is all calls, those made inside scripts and the demo's own
	// INFO included.
	Total float64
}

// demo holds what the steps share.
type demo struct {
	Config
	began             time.Time       // when Run began, the account's zero
	dir               string          // every process's log, and the kubeconfig
	env               []string        // KUBECONFIG, for every process
	kubectl           testenv.Kubectl // as the admin, in Root
	nodes             []*redisproc.Server
	k8s               client.Client
	procs             []*proc.Process
	operators, agents []*candidate
	res               Result

	mu      sync.Mutex // guards the screen's state
	events  []string   // the account so far
	rows    string     // the table as last printed
	showing bool       // the table is shown
}

// Run runs the demo until its scenario ends (or ctx, with Keep).
func Run(ctx context.Context, c Config) (res Result, err error) {
	d := &demo{Config: c, began: time.Now()}
	if d.dir, err = os.MkdirTemp("", "redislock-demo-"); err != nil {
		return res, fmt.Errorf("demo: %w", err)
	}
	// etcd's and kube-apiserver's own output goes with the other logs,
	// so that a control plane that does not start says why.
	cpLog, err := os.Create(filepath.Join(d.dir, "control-plane.log"))
	if err != nil {
		return res, fmt.Errorf("demo: %w", err)
	}
	defer func() { _ = cpLog.Close() }() // after the processes stop
	env := &envtest.Environment{BinaryAssetsDirectory: c.Assets, ControlPlaneStartTimeout: testenv.ControlPlaneStartTimeout}
	env.ControlPlane.Etcd = &envtest.Etcd{Out: cpLog, Err: cpLog}
	env.ControlPlane.APIServer = &envtest.APIServer{Out: cpLog, Err: cpLog}
	defer func() { // in reverse order of dependence; the logs stay if something failed
		for i := len(d.procs) - 1; i >= 0; i-- {
			_ = d.procs[i].Stop(5 * time.Second) // how each exited is in its log
			res.PIDs = append(res.PIDs, d.procs[i].Pid())
		}
		if stopErr := env.Stop(); stopErr != nil && err == nil {
			err = fmt.Errorf("demo: stop the control plane: %w", stopErr)
		}
		for _, n := range d.nodes {
			n.Stop()
		}
		if err != nil {
			_, _ = fmt.Fprintf(c.Out, "logs of every process are in %s\n", d.dir)
		} else {
			err = os.RemoveAll(d.dir)
		}
	}()
	var addrs []string
	for range map[bool]int{false: 1, true: 3}[c.Redlock] {
		n, err := redisproc.Start(redisproc.Options{})
		if err != nil {
			return res, err
		}
		d.nodes, addrs = append(d.nodes, n), append(addrs, n.Addr)
	}
	d.event("redis-server on %s", strings.Join(addrs, ", "))
	cfg, err := env.Start()
	if err != nil {
		return res, fmt.Errorf("demo: start the control plane with the binaries in %s: %w; the end of its log:\n%s", c.Assets, err, proc.FileTail(cpLog.Name(), 4096))
	}
	d.k8s, err = testenv.Client(cfg)
	if err == nil {
		d.kubectl, err = testenv.AdminKubectl(env, "demo-admin", d.dir, c.Root)
	}
	if err != nil {
		return res, fmt.Errorf("demo: %w", err)
	}
	d.env = []string{"KUBECONFIG=" + d.kubectl.Kubeconfig}
	d.event("kube-apiserver and etcd up (envtest, %s)", filepath.Base(c.Assets))
	if err := d.install(ctx, addrs); err != nil {
		return res, err
	}
	if err := d.startCandidates(ctx); err != nil {
		return res, err
	}
	defer d.show(ctx)()
	if err := d.scenario(ctx); err != nil {
		return res, err
	}
	d.event("summary: operator failover after kill -9 %v (ttl %v); workload handover after SIGTERM %v",
		d.res.Failover.Round(time.Millisecond), c.TTL, d.res.Handover.Round(time.Millisecond))
	if err := d.commandRates(ctx); err != nil {
		return res, err
	}
	if c.Keep {
		d.event("running until interrupted (Ctrl-C)")
		<-ctx.Done()
	}
	return d.res, nil
}

// lockManifest is the namespaces and the two RedisLocks, on the Redis
// nodes %[1]s in mode %[2]s with ttl %[3]v.
const lockManifest = `{apiVersion: v1, kind: Namespace, metadata: {name: redislock-system}}
---
{apiVersion: v1, kind: Namespace, metadata: {name: demo}}
---
{apiVersion: redislock.io/v1alpha1, kind: RedisLock, metadata: {namespace: demo, name: operator},
 spec: {ttl: %[3]v, renewDeadline: %[4]v, renewInterval: %[5]v, redis: {mode: %[2]s, addrs: %[1]s}}}
---
{apiVersion: redislock.io/v1alpha1, kind: RedisLock, metadata: {namespace: demo, name: worker},
 spec: {ttl: %[3]v, renewDeadline: %[4]v, renewInterval: %[5]v, redis: {mode: %[2]s, addrs: %[1]s}}}
---
`

// install applies with kubectl, as a user would, config/crd, the
// RedisLocks and the generated webhook configuration pointed at the
// controller, which it then starts with its webhook, serving a certificate
// it issues itself.
func (d *demo) install(ctx context.Context, addrs []string) error {
	webhook, err := testenv.NewLocalWebhook(d.Root, webhookConfig, namespace, filepath.Join(d.dir, "webhook-certs"))
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	mode := map[bool]string{false: "Standalone", true: "Redlock"}[d.Redlock]
	nodes, err := json.Marshal(addrs) // a YAML flow sequence too
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	t := redislock.Timing{TTL: d.TTL}.WithDefaults() // what the controller would derive, written out
	manifest := append(fmt.Appendf(nil, lockManifest, nodes, mode, t.TTL, t.RenewDeadline, t.RenewInterval), webhook.Manifest...)
	if err := os.WriteFile(filepath.Join(d.dir, "demo.yaml"), manifest, 0o600); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	for _, args := range [][]string{
		{"apply", "--server-side", "-k", filepath.Join("config", "crd")},
		{"wait", "--for=condition=Established", "--timeout=60s", "crd/redislocks.redislock.io"},
		{"apply", "-f", filepath.Join(d.dir, "demo.yaml")},
	} {
		if out, err := d.kubectl.Run(ctx, "", args...); err != nil {
			return fmt.Errorf("demo: %w\n%s", err, out)
		}
	}
	d.event("kubectl apply -k config/crd: RedisLock CRD installed")
	args := append([]string{"controller", "-metrics-bind-address=0", "-health-probe-bind-address=0", "-agent-image=" + d.Redislock}, webhook.Args...)
	if _, err := d.start("controller", d.Redislock, args, "POD_NAMESPACE=redislock-system"); err != nil {
		return err
	}
	if out, err := d.kubectl.Run(ctx, "", "wait", "--for=jsonpath={.webhooks[0].clientConfig.caBundle}", "--timeout=30s", "mutatingwebhookconfiguration/"+webhookConfig); err != nil {
		return fmt.Errorf("demo: %w\n%s", err, out)
	}
	d.event("controller started; it issued its webhook certificate and set the caBundle")
	if out, err := d.kubectl.Run(ctx, "", "wait", "-n", namespace, "--for=condition=Ready", "--timeout=30s", "redislock/"+operatorLock, "redislock/"+workerLock); err != nil {
		return fmt.Errorf("demo: %w\n%s", err, out)
	}
	d.event("RedisLocks %s/%s and %s/%s are Ready (%s, ttl %v)", namespace, operatorLock, namespace, workerLock, mode, d.TTL)
	return nil
}

// start runs bin with args and env added to d.env, its output in a log
// named name, until the demo stops it.
func (d *demo) start(name, bin string, args []string, env ...string) (*proc.Process, error) {
	p, err := proc.Start(proc.Options{Name: name, Path: bin, Args: args, Env: append(env, d.env...), Log: filepath.Join(d.dir, name+".log")})
	if err == nil {
		d.procs = append(d.procs, p)
	}
	return p, err
}

// startCandidates runs three replicas of the sample operator on the
// operator lock, and the agents of three pods annotated with the worker
// lock. Each answers /leader on a port of its own: the "pods" share this
// host's network.
func (d *demo) startCandidates(ctx context.Context) error {
	for i := range 3 {
		port, err := proc.FreePort()
		if err != nil {
			return err
		}
		id, addr := "operator-"+strconv.Itoa(i), "127.0.0.1:"+strconv.Itoa(port)
		p, err := d.start(id, d.SampleOperator, []string{"-election=redis", "-redislock=" + namespace + "/" + operatorLock, "-identity=" + id, "-http-address=" + addr})
		if err != nil {
			return err
		}
		d.operators = append(d.operators, &candidate{Process: p, id: id, url: "http://" + addr + "/leader", dead: "killed"})
	}
	d.event("3 replicas of the sample operator started (leader election on RedisLock %s/%s)", namespace, operatorLock)
	for i := range 3 {
		port, err := proc.FreePort()
		if err != nil {
			return err
		}
		id := "worker-" + strconv.Itoa(i)
		p, err := d.startAgent(ctx, id, strconv.Itoa(port), i == 0)
		if err != nil {
			return err
		}
		d.agents = append(d.agents, &candidate{Process: p, id: id, url: "http://127.0.0.1:" + strconv.Itoa(port) + "/leader", dead: "stopped"})
	}
	d.event("3 workload pods created with annotation %s: %s; their agents run as local processes", inject.LockAnnotation, workerLock)
	return nil
}

// startAgent creates the pod name and runs, as there is no kubelet here,
// the agent container the webhook added: its args as the webhook wrote
// them, the downward-API env filled in, the shared volume a directory, and
// its listen address on loopback, where a pod's would be its own network.
func (d *demo) startAgent(ctx context.Context, name, port string, first bool) (*proc.Process, error) {
	agent, err := testenv.CreateInjectedPod(ctx, d.k8s, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"app": "worker"},
		Annotations: map[string]string{inject.LockAnnotation: workerLock, inject.PortAnnotation: port}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.test/worker:1"}}}}, 30*time.Second)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	volume := filepath.Join(d.dir, name)
	if err := os.MkdirAll(volume, 0o700); err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	// The listen address as the webhook writes it, ":PORT" (every
	// interface of the pod), moved to loopback. The argument is written by
	// the flags' owner, so that a renamed flag cannot miss the rewrite.
	anyHost, loopback := agentflags.Flags{HTTPAddress: ":"}.Args()[0], agentflags.Flags{HTTPAddress: "127.0.0.1:"}.Args()[0]
	args, moved := make([]string, len(agent.Args)), false
	for j, a := range agent.Args {
		args[j] = strings.ReplaceAll(a, inject.MountPath, volume)
		if port, ok := strings.CutPrefix(args[j], anyHost); ok {
			args[j], moved = loopback+port, true
		}
	}
	if !moved {
		return nil, fmt.Errorf("demo: the injected agent's args %q set no listen address %sPORT to move to loopback", agent.Args, anyHost)
	}
	if first {
		d.event("pod %s: the webhook injected the sidecar %q: %s %s", name, agent.Name, agent.Image, strings.Join(agent.Args, " "))
	}
	return d.start("agent-"+name, d.Redislock, args, "POD_NAME="+name, "POD_NAMESPACE="+namespace)
}

// scenario waits for both leaders, kills the operators' leader with
// SIGKILL, stops the workload's leading agent with SIGTERM, and times the
// two handovers: from the signal to the instant that another candidate's
// first /leader answer of 200 is true of (asked every 2ms).
func (d *demo) scenario(ctx context.Context) error {
	// The Redis nodes just started: the restart guard grants each lock
	// once they have been up for a ttl.
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 3*d.TTL+30*time.Second, true, func(ctx context.Context) (bool, error) {
		op, _ := leader(ctx, d.operators, nil)
		w, _ := leader(ctx, d.agents, nil)
		return op != nil && w != nil, nil
	}); err != nil {
		return fmt.Errorf("demo: waiting for a leader on both locks: %w", err)
	}
	for _, s := range []struct {
		cs            []*candidate
		within        time.Duration
		stop          func(*proc.Process) error
		before, after string
		took          *time.Duration
	}{
		{d.operators, 2*d.TTL + 10*time.Second, (*proc.Process).Kill,
			"kill -9 %s, the operators' leader: a crash, so its lock must expire (ttl " + d.TTL.String() + ")", "%s leads the operators: failover took %v", &d.res.Failover},
		{d.agents, 10 * time.Second, func(p *proc.Process) error { _ = p.Stop(10 * time.Second); return nil }, // its exit is in its log
			"SIGTERM %s's agent (pod deleted): a graceful stop, so it releases the lock", "%s leads the workload: handover took %v", &d.res.Handover},
	} {
		if err := pause(ctx, 3*time.Second); err != nil {
			return err
		}
		old, _ := leader(ctx, s.cs, nil)
		if old == nil {
			return fmt.Errorf("demo: no leader among %s and the others to stop", s.cs[0].id)
		}
		d.event(s.before, old.id)
		from := time.Now()
		if err := s.stop(old.Process); err != nil {
			return fmt.Errorf("demo: stop %s: %w", old.id, err)
		}
		var next *candidate
		var at time.Time
		if err := wait.PollUntilContextTimeout(ctx, 2*time.Millisecond, s.within, true, func(ctx context.Context) (bool, error) {
			next, at = leader(ctx, s.cs, old)
			return next != nil, nil
		}); err != nil {
			return fmt.Errorf("demo: waiting for a leader other than %s: %w", old.id, err)
		}
		*s.took = at.Sub(from)
		d.event(s.after, next.id, s.took.Round(time.Millisecond))
	}
	return pause(ctx, 3*time.Second)
}

// commandRates counts what every node executes over rateWindow, with the
// election in its steady state after the scenario, and prints a line
// before and a table after.
func (d *demo) commandRates(ctx context.Context) error {
	clients := make([]redis.UniversalClient, len(d.nodes))
	for i, n := range d.nodes {
		c := n.Client()
		defer func() { _ = c.Close() }() // its commands are counted
		clients[i] = c
	}
	w, err := redisstats.Begin(ctx, clients...)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	d.event("counting each Redis node's commands for %v (INFO commandstats): %d operators on %s/%s and %d agents on %s/%s electing (one leader each), and the controller",
		rateWindow, running(d.operators), namespace, operatorLock, running(d.agents), namespace, workerLock)
	if err := pause(ctx, rateWindow); err != nil {
		return fmt.Errorf("demo: counting commands: %w", err)
	}
	counts, took, err := w.End(ctx)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	secs := took.Seconds()
	rows := []string{"REDIS NODE\tSCRIPTS/s\tPUBLISH/s\tALL COMMANDS/s"}
	for i, n := range d.nodes {
		r := NodeRate{Addr: n.Addr, Scripts: float64(counts[i].Scripts()) / secs, Publish: float64(counts[i]["publish"]) / secs, Total: float64(counts[i].Total()) / secs}
		d.res.Rates = append(d.res.Rates, r)
		rows = append(rows, fmt.Sprintf("%s\t%.1f\t%.1f\t%.1f", r.Addr, r.Scripts, r.Publish, r.Total))
	}
	d.event("commands per second on each Redis node over the last %.1fs:\n%s", secs, strings.TrimRight(indent(table(rows)), "\n"))
	return nil
}

// pause lets the account show a steady state for d.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("demo: %w", ctx.Err())
	case <-t.C:
		return nil
	}
}
