// Package demo is `make demo`: the whole system on one machine, without a
// cluster. It starts Redis (three nodes, Redlock, or one) and a throwaway
// control plane (the envtest binaries), installs the CRD from config/crd,
// and runs as local processes the controller (with its webhook), three
// replicas of the sample operator electing on one RedisLock, and a
// three-pod workload whose agents the webhook injected. It shows who leads,
// kills the operators' leader and stops the workload's leading agent, times
// both handovers, measures what the election then costs each Redis node
// (commands per second, from INFO commandstats), and stops everything it
// started.
package demo

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/internal/inject"
	"github.com/redislock/redislock/internal/redisproc"
	"github.com/redislock/redislock/internal/testenv"
)

// Names of what the demo creates.
const (
	namespace     = "demo"
	operatorLock  = "operator"
	workerLock    = "worker"
	webhookConfig = "redislock-demo-injector"
	replicas      = 3
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
	// moment another replica leads.
	Failover time.Duration
	// Handover is from the SIGTERM of the workload's leading agent to the
	// moment another agent answers 200.
	Handover time.Duration
	// PIDs are the processes the demo started (all stopped when Run
	// returns).
	PIDs []int
	// Rates are the commands per second that each Redis node executed
	// over the last 10 s of the scenario, in the order of the nodes.
	Rates []NodeRate
}

// Run runs the demo until its scenario ends (or ctx, with Keep).
func Run(ctx context.Context, c Config) (res Result, err error) {
	dir, err := os.MkdirTemp("", "redislock-demo-")
	if err != nil {
		return res, fmt.Errorf("demo: %w", err)
	}
	v := newView(c.Out, c.Live, c.TTL, c.Redlock)
	ps := &procs{dir: dir}
	// Stop in reverse order of dependence: the account, the processes,
	// the control plane, Redis; keep the logs if something failed.
	var env *envtest.Environment
	var stopRedis func()
	defer func() {
		v.stop()
		ps.stopAll(5 * time.Second)
		res.PIDs = ps.pids()
		if env != nil {
			_ = env.Stop()
		}
		if stopRedis != nil {
			stopRedis()
		}
		if err != nil {
			_, _ = fmt.Fprintf(c.Out, "logs of every process are in %s\n", dir)
			return
		}
		_ = os.RemoveAll(dir)
	}()

	nodes, stopRedis, err := startRedis(c.Redlock)
	if err != nil {
		return res, err
	}
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.Addr)
	}
	v.event("redis-server on %s", strings.Join(addrs, ", "))

	env = &envtest.Environment{BinaryAssetsDirectory: c.Assets}
	cfg, err := env.Start()
	if err != nil {
		return res, fmt.Errorf("demo: start the control plane with the binaries in %s: %w", c.Assets, err)
	}
	d := &demo{c: c, v: v, ps: ps, dir: dir, env: env}
	if err := d.connect(cfg); err != nil {
		return res, err
	}
	v.event("kube-apiserver and etcd up (envtest, %s)", filepath.Base(c.Assets))
	if err := d.installCRD(ctx); err != nil {
		return res, err
	}
	if err := d.startController(ctx); err != nil {
		return res, err
	}
	if err := d.createLocks(ctx, addrs); err != nil {
		return res, err
	}
	if err := d.startOperators(); err != nil {
		return res, err
	}
	if err := d.startWorkers(ctx); err != nil {
		return res, err
	}
	v.attach(d.k8s, d.operators, d.agents)
	go v.run(ctx)
	if res.Failover, res.Handover, err = d.scenario(ctx); err != nil {
		return res, err
	}
	v.event("summary: operator failover after kill -9 %v (ttl %v); workload handover after SIGTERM %v",
		res.Failover.Round(time.Millisecond), c.TTL, res.Handover.Round(time.Millisecond))
	if res.Rates, err = d.commandRates(ctx, nodes, rateWindow); err != nil {
		return res, err
	}
	if c.Keep {
		v.event("running until interrupted (Ctrl-C)")
		<-ctx.Done()
	}
	return res, nil
}

// demo holds what the steps share.
type demo struct {
	c          Config
	v          *view
	ps         *procs
	dir        string
	env        *envtest.Environment
	k8s        client.Client
	kubeconfig string
	operators  map[string]*proc
	agents     map[string]*agentProc
}

// agentProc is a workload pod's agent, run as a local process.
type agentProc struct {
	*proc
	url string
}

// startRedis starts one Redis node, or three for Redlock.
func startRedis(redlock bool) (servers []*redisproc.Server, stop func(), err error) {
	n := 1
	if redlock {
		n = 3
	}
	stop = func() {
		for _, s := range servers {
			s.Stop()
		}
	}
	for range n {
		s, err := redisproc.Start(redisproc.Options{})
		if err != nil {
			stop()
			return nil, nil, err
		}
		servers = append(servers, s)
	}
	return servers, stop, nil
}

// connect makes the API client and a kubeconfig for the processes.
func (d *demo) connect(cfg *rest.Config) error {
	scheme, err := testenv.Scheme()
	if err != nil {
		return err
	}
	if d.k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	user, err := d.env.AddUser(envtest.User{Name: "demo-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	d.kubeconfig = filepath.Join(d.dir, "kubeconfig")
	return os.WriteFile(d.kubeconfig, kc, 0o600)
}

// kubectl runs the control plane's kubectl with stdin.
func (d *demo) kubectl(ctx context.Context, stdin []byte, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(d.c.Assets, "kubectl"), append([]string{"--kubeconfig", d.kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(string(stdin))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("demo: kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// installCRD applies config/crd, as a user would, and creates the
// namespaces.
func (d *demo) installCRD(ctx context.Context) error {
	if err := d.kubectl(ctx, nil, "apply", "--server-side", "-k", filepath.Join(d.c.Root, "config", "crd")); err != nil {
		return err
	}
	if err := d.kubectl(ctx, nil, "wait", "--for=condition=Established", "--timeout=60s", "crd/redislocks.redislock.io"); err != nil {
		return err
	}
	for _, ns := range []string{"redislock-system", namespace} {
		if err := d.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("demo: namespace %s: %w", ns, err)
		}
	}
	d.v.event("kubectl apply -k config/crd: RedisLock CRD installed")
	return nil
}

// startController runs the controller with its webhook, serving a
// certificate it issues itself, and points the generated webhook
// configuration at it.
func (d *demo) startController(ctx context.Context) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	wc, err := testenv.LocalWebhookConfiguration(d.c.Root, webhookConfig, "https://"+net.JoinHostPort("127.0.0.1", port), namespace)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if err := d.kubectl(ctx, wc, "apply", "-f", "-"); err != nil {
		return err
	}
	if _, err := d.ps.start("controller", d.c.Redislock, []string{
		"controller", "-metrics-bind-address=0", "-health-probe-bind-address=0",
		"-agent-image=" + d.c.Redislock, "-webhook-port=" + port, "-webhook-cert-dir=" + filepath.Join(d.dir, "webhook-certs"),
		"-webhook-hosts=127.0.0.1", "-webhook-configuration=" + webhookConfig,
	}, []string{"KUBECONFIG=" + d.kubeconfig, "POD_NAMESPACE=redislock-system"}, nil); err != nil {
		return err
	}
	if err := waitFor(ctx, 30*time.Second, "the controller to set the webhook's caBundle", func() bool {
		var wc admissionv1.MutatingWebhookConfiguration
		return d.k8s.Get(ctx, client.ObjectKey{Name: webhookConfig}, &wc) == nil && len(wc.Webhooks) > 0 && len(wc.Webhooks[0].ClientConfig.CABundle) > 0
	}); err != nil {
		return err
	}
	d.v.event("controller started; it issued its webhook certificate and set the caBundle")
	return nil
}

// createLocks creates the two RedisLocks and waits until the controller
// says they are Ready.
func (d *demo) createLocks(ctx context.Context, addrs []string) error {
	mode := v1alpha1.ModeStandalone
	if d.c.Redlock {
		mode = v1alpha1.ModeRedlock
	}
	for _, name := range []string{operatorLock, workerLock} {
		rl := &v1alpha1.RedisLock{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			Spec: v1alpha1.RedisLockSpec{
				Redis:         v1alpha1.RedisConnection{Mode: mode, Addrs: addrs},
				TTL:           &v1alpha1.Duration{Duration: d.c.TTL},
				RenewDeadline: &v1alpha1.Duration{Duration: d.c.TTL * 2 / 3},
				RenewInterval: &v1alpha1.Duration{Duration: d.c.TTL * 2 / 15},
			},
		}
		if err := d.k8s.Create(ctx, rl); err != nil {
			return fmt.Errorf("demo: RedisLock %s: %w", name, err)
		}
	}
	err := waitFor(ctx, 30*time.Second, "the RedisLocks to be Ready", func() bool {
		for _, name := range []string{operatorLock, workerLock} {
			var rl v1alpha1.RedisLock
			if d.k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &rl) != nil ||
				!meta.IsStatusConditionTrue(rl.Status.Conditions, v1alpha1.ConditionReady) {
				return false
			}
		}
		return true
	})
	if err == nil {
		d.v.event("RedisLocks %s/%s and %s/%s are Ready (%s, ttl %v)", namespace, operatorLock, namespace, workerLock, mode, d.c.TTL)
	}
	return err
}

// startOperators runs three replicas of the sample operator on the
// operator lock.
func (d *demo) startOperators() error {
	d.operators = map[string]*proc{}
	for i := range replicas {
		id := "operator-" + strconv.Itoa(i)
		p, err := d.ps.start(id, d.c.SampleOperator,
			[]string{"-election=redis", "-redislock=" + namespace + "/" + operatorLock, "-identity=" + id},
			[]string{"KUBECONFIG=" + d.kubeconfig}, func(line string) { d.v.operatorLine(id, line) })
		if err != nil {
			return err
		}
		d.operators[id] = p
		d.v.operatorStarted(id)
	}
	d.v.event("3 replicas of the sample operator started (leader election on RedisLock %s/%s)", namespace, operatorLock)
	return nil
}

// startWorkers creates three pods annotated with the worker lock; the
// webhook injects the agent into each, and the demo runs each injected
// agent container as a local process (there is no kubelet here): its args
// as the webhook wrote them, the downward-API env filled in, and the
// shared volume a directory.
func (d *demo) startWorkers(ctx context.Context) error {
	d.agents = map[string]*agentProc{}
	for i := range replicas {
		name := "worker-" + strconv.Itoa(i)
		port, err := freePort() // several "pods" share this host's network
		if err != nil {
			return err
		}
		agent, err := d.injectedAgent(ctx, name, port)
		if err != nil {
			return err
		}
		volume := filepath.Join(d.dir, name)
		if err := os.MkdirAll(volume, 0o700); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		args := make([]string, len(agent.Args))
		for j, a := range agent.Args {
			args[j] = strings.ReplaceAll(a, inject.MountPath, volume)
		}
		if i == 0 {
			d.v.event("pod %s: the webhook injected the sidecar %q: %s %s", name, agent.Name, agent.Image, strings.Join(agent.Args, " "))
		}
		p, err := d.ps.start("agent-"+name, d.c.Redislock, args,
			[]string{"KUBECONFIG=" + d.kubeconfig, "POD_NAME=" + name, "POD_NAMESPACE=" + namespace}, nil)
		if err != nil {
			return err
		}
		d.agents[name] = &agentProc{proc: p, url: "http://127.0.0.1:" + port + "/leader"}
	}
	d.v.event("3 workload pods created with annotation %s: %s; their agents run as local processes", inject.LockAnnotation, workerLock)
	return nil
}

// injectedAgent creates the pod name and returns the agent container the
// webhook added. The webhook server may still be starting (the API server
// then admits the pod untouched: failurePolicy Ignore), so an untouched pod
// is deleted and created again.
func (d *demo) injectedAgent(ctx context.Context, name, port string) (corev1.Container, error) {
	var agent corev1.Container
	err := waitFor(ctx, 30*time.Second, "the webhook to inject "+name, func() bool {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"app": "worker"},
				Annotations: map[string]string{inject.LockAnnotation: workerLock, inject.PortAnnotation: port}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.test/worker:1"}}},
		}
		if err := d.k8s.Create(ctx, pod); err != nil {
			return false
		}
		for _, c := range pod.Spec.InitContainers {
			if c.Name == inject.ContainerName {
				agent = c
				return true
			}
		}
		_ = d.k8s.Delete(ctx, pod, client.GracePeriodSeconds(0))
		return false
	})
	return agent, err
}

// scenario waits for both leaders, kills the operators' leader with
// SIGKILL, stops the workload's leading agent with SIGTERM, and times the
// two handovers.
func (d *demo) scenario(ctx context.Context) (failover, handover time.Duration, err error) {
	leaders := func() (op, worker string) { return d.v.operatorLeader(), d.v.agentLeader() }
	// The Redis nodes just started: the restart guard grants each lock
	// once they have been up for a ttl.
	if err := waitFor(ctx, 3*d.c.TTL+30*time.Second, "a leader on both locks", func() bool {
		op, w := leaders()
		return op != "" && w != ""
	}); err != nil {
		return 0, 0, err
	}
	if err := pause(ctx, 3*time.Second); err != nil {
		return 0, 0, err
	}

	op, _ := leaders()
	d.v.event("kill -9 %s, the operators' leader: a crash, so its lock must expire (ttl %v)", op, d.c.TTL)
	killed := time.Now()
	_ = d.operators[op].cmd.Process.Kill()
	<-d.operators[op].exited
	if err := waitFor(ctx, 2*d.c.TTL+10*time.Second, "another operator to lead", func() bool {
		next, _ := leaders()
		return next != "" && next != op
	}); err != nil {
		return 0, 0, err
	}
	next, at := d.v.operatorLeading()
	failover = at.Sub(killed)
	d.v.event("%s leads the operators: failover took %v", next, failover.Round(time.Millisecond))
	if err := pause(ctx, 3*time.Second); err != nil {
		return 0, 0, err
	}

	_, w := leaders()
	d.v.event("SIGTERM %s's agent (pod deleted): a graceful stop, so it releases the lock", w)
	termed := time.Now()
	d.agents[w].stop(10 * time.Second)
	var nextW string
	if err := pollFor(ctx, 10*time.Second, 2*time.Millisecond, "another agent to lead", func() bool {
		for name, a := range d.agents {
			if name != w && a.alive() && leading(ctx, a.url) {
				nextW = name
				return true
			}
		}
		return false
	}); err != nil {
		return 0, 0, err
	}
	handover = time.Since(termed)
	d.v.event("%s leads the workload: handover took %v", nextW, handover.Round(time.Millisecond))
	return failover, handover, pause(ctx, 3*time.Second)
}

// waitFor polls cond every 50ms until it holds, within timeout.
func waitFor(ctx context.Context, timeout time.Duration, what string, cond func() bool) error {
	return pollFor(ctx, timeout, 50*time.Millisecond, what, cond)
}

func pollFor(ctx context.Context, timeout, every time.Duration, what string, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("demo: waiting for %s: %w", what, ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}

// pause lets the account show a steady state for d.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("demo: %w", err)
	}
	defer func() { _ = l.Close() }()
	_, port, err := net.SplitHostPort(l.Addr().String())
	return port, err
}
