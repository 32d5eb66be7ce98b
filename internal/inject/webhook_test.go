package inject_test

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/internal/agentflags"
	"github.com/redislock/redislock/internal/inject"
	"github.com/redislock/redislock/internal/testing/testenv"
)

const image = "example.test/redislock:dev"

// agent is what the test webhook injects: resources other than the
// defaults, so the checks see the configured ones arrive.
var agent = inject.Agent{
	Image: image, ClusterID: "test-cluster",
	Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("25m"), corev1.ResourceMemory: resource.MustParse("48Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("96Mi")},
	},
}

// k8s talks to the test API server, which calls the webhook installed from
// config/webhook (envtest points it at the local webhook server).
var (
	k8s        client.Client
	restConfig *rest.Config
	scheme     *runtime.Scheme
)

func TestMain(m *testing.M) {
	env := &envtest.Environment{
		WebhookInstallOptions: envtest.WebhookInstallOptions{Paths: []string{filepath.Join("..", "..", "config", "webhook")}},
	}
	testenv.Main(filepath.Join("..", ".."), env, true, func(cfg *rest.Config) (int, error) { return run(m, cfg, &env.WebhookInstallOptions) })
}

func run(m *testing.M, cfg *rest.Config, webhooks *envtest.WebhookInstallOptions) (int, error) {
	restConfig = cfg
	var err error
	if scheme, err = testenv.Scheme(); err != nil {
		return 0, err
	}
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done, err := startWebhook(ctx, cfg, webhooks)
	if err != nil {
		return 0, err
	}
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		return 0, fmt.Errorf("manager: %w", err)
	}
	return code, nil
}

// startWebhook runs a manager that serves the Webhook where envtest's
// webhook configuration points, and waits until it answers.
func startWebhook(ctx context.Context, cfg *rest.Config, o *envtest.WebhookInstallOptions) (<-chan error, error) {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: o.LocalServingHost, Port: o.LocalServingPort, CertDir: o.LocalServingCertDir,
		}),
	})
	if err != nil {
		return nil, err
	}
	wh, err := inject.NewWebhook(mgr.GetAPIReader(), scheme, agent, "")
	if err != nil {
		return nil, err
	}
	mgr.GetWebhookServer().Register(inject.Path, &webhook.Admission{Handler: wh})
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var notStarted error
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		select {
		case err := <-done:
			return false, fmt.Errorf("manager stopped: %w", err)
		default:
		}
		notStarted = mgr.GetWebhookServer().StartedChecker()(nil)
		return notStarted == nil, nil
	})
	if wait.Interrupted(err) {
		return nil, fmt.Errorf("webhook server did not start within 30s: %w", notStarted)
	}
	if err != nil {
		return nil, err
	}
	return done, nil
}

// namespace creates a fresh namespace holding a RedisLock called "lock".
func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "inject-"}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	rl := &v1alpha1.RedisLock{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "lock"},
		Spec:       v1alpha1.RedisLockSpec{Redis: &v1alpha1.RedisConnectionSpec{Addrs: []string{"127.0.0.1:6379"}}},
	}
	if err := k8s.Create(context.Background(), rl); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func appPod(ns string, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app", Annotations: annotations},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "example.test/app:1",
			Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
		}}},
	}
}

// defaults is the injection a pod gets with only LockAnnotation "lock".
var defaults = inject.Injection{Lock: "lock", Port: inject.DefaultPort, LabelPod: true}

// checkInjected fails unless pod carries exactly one agent, set up as in
// says.
func checkInjected(t *testing.T, pod *corev1.Pod, in inject.Injection) {
	t.Helper()
	lock, port := in.Lock, in.Port
	var agents []corev1.Container
	for _, c := range pod.Spec.InitContainers {
		if c.Name == inject.ContainerName {
			agents = append(agents, c)
		}
	}
	if len(agents) != 1 {
		t.Fatalf("pod has %d agent containers, want 1: %+v", len(agents), pod.Spec.InitContainers)
	}
	a := agents[0]
	if a.Image != image {
		t.Errorf("agent image %q, want %q", a.Image, image)
	}
	if !equalResources(a.Resources, agent.Resources) {
		t.Errorf("agent resources %v, want the configured %v", a.Resources, agent.Resources)
	}
	if a.RestartPolicy == nil || *a.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("agent restartPolicy %v, want Always (a native sidecar)", a.RestartPolicy)
	}
	// The agent's own flag set parses what the webhook wrote. With a probe
	// port, /leader is on 127.0.0.1 and the kubelet probes that port.
	wantFlags := agentflags.Flags{Lock: lock, HTTPAddress: fmt.Sprintf(":%d", port), LabelPod: in.LabelPod, LeaderFile: inject.LeaderFile, ClusterID: "test-cluster",
		Health: in.Health, StepDownAfter: in.StepDownAfter, Fencing: in.Fencing}
	served := port
	if in.ProbePort != 0 {
		wantFlags.HTTPAddress, wantFlags.ProbeAddress = fmt.Sprintf("127.0.0.1:%d", port), fmt.Sprintf(":%d", in.ProbePort)
		served = in.ProbePort
	}
	if got, rest := parseAgentArgs(t, a.Args); got != wantFlags || len(rest) != 0 {
		t.Errorf("agent args %q parse into %+v and %q, want %+v", a.Args, got, rest, wantFlags)
	}
	env := map[string]string{}
	for _, e := range a.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			env[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	if env["POD_NAME"] != "metadata.name" || env["POD_NAMESPACE"] != "metadata.namespace" {
		t.Errorf("agent env %v lacks the downward-API POD_NAME and POD_NAMESPACE", a.Env)
	}
	if len(a.Ports) != 1 || a.Ports[0].ContainerPort != served {
		t.Errorf("agent ports %+v, want %d", a.Ports, served)
	}
	for name, p := range map[string]*corev1.Probe{"startup": a.StartupProbe, "liveness": a.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port.IntVal != served {
			t.Errorf("agent %s probe %+v, want GET /healthz on %d", name, p, served)
		}
	}
	// Each app container is told where to ask, where to read, and who it
	// is (a downward-API reference, shown here as "fieldRef:" and its path).
	want := map[string]string{
		inject.LeaderURLEnv:  fmt.Sprintf("http://127.0.0.1:%d/leader", port),
		inject.LeaderFileEnv: inject.MountPath + "/leader.json",
		inject.IdentityEnv:   "fieldRef:metadata.name",
	}
	for _, c := range pod.Spec.Containers {
		got := map[string]string{}
		for _, e := range c.Env {
			if _, ok := want[e.Name]; !ok {
				continue
			}
			v := e.Value
			if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
				v = "fieldRef:" + e.ValueFrom.FieldRef.FieldPath
			}
			got[e.Name] = v
		}
		if !maps.Equal(got, want) {
			t.Errorf("container %s: env %v, want %v", c.Name, got, want)
		}
		mounted := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.Name == inject.VolumeName && m.MountPath == inject.MountPath && m.ReadOnly
		})
		if !mounted {
			t.Errorf("container %s: volume mounts %+v lack %s read-only at %s", c.Name, c.VolumeMounts, inject.VolumeName, inject.MountPath)
		}
	}
}

func TestAnnotatedPodGetsTheAgent(t *testing.T) {
	ns := namespace(t)
	pod := appPod(ns, map[string]string{inject.LockAnnotation: "lock"})
	if err := k8s.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	// The object the create returned is the stored, mutated pod.
	checkInjected(t, pod, defaults)
	if pod.Spec.InitContainers[0].Name != inject.ContainerName {
		t.Errorf("the agent is not the first init container: %+v", pod.Spec.InitContainers)
	}
}

func TestPortAnnotationMovesTheAgent(t *testing.T) {
	ns := namespace(t)
	pod := appPod(ns, map[string]string{inject.LockAnnotation: "lock", inject.PortAnnotation: "9777"})
	if err := k8s.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	checkInjected(t, pod, inject.Injection{Lock: "lock", Port: 9777, LabelPod: true})
}

// The probe-port annotation gives the probes and /metrics a port of their
// own, on every address, and keeps /leader on 127.0.0.1.
func TestProbePortAnnotationKeepsLeaderOnLoopback(t *testing.T) {
	ns := namespace(t)
	pod := appPod(ns, map[string]string{inject.LockAnnotation: "lock", inject.ProbePortAnnotation: "8091"})
	if err := k8s.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	checkInjected(t, pod, inject.Injection{Lock: "lock", Port: inject.DefaultPort, ProbePort: 8091, LabelPod: true})
}

// The label-pod annotation turns the pod label off; "true" and no
// annotation keep it.
func TestLabelPodAnnotation(t *testing.T) {
	ns := namespace(t)
	for _, tc := range []struct {
		value    string // "" for no annotation
		labelPod bool
	}{{"", true}, {"true", true}, {"false", false}} {
		t.Run(cmp.Or(tc.value, "unset"), func(t *testing.T) {
			annotations := map[string]string{inject.LockAnnotation: "lock"}
			if tc.value != "" {
				annotations[inject.LabelPodAnnotation] = tc.value
			}
			pod := appPod(ns, annotations)
			pod.GenerateName, pod.Name = "app-", ""
			if err := k8s.Create(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			checkInjected(t, pod, inject.Injection{Lock: "lock", Port: inject.DefaultPort, LabelPod: tc.labelPod})
		})
	}
}

// The health annotations gate the agent's leadership: its flags carry the
// signal and the step-down wait.
// The pod is docs/workloads.md's.
func TestHealthAnnotationsGateTheAgent(t *testing.T) {
	block, err := testenv.DocBlockByID("../..", "docs/workloads.md", "health-gated-pod")
	pod := docPod(t, namespace(t), block, err)
	if err := k8s.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	checkInjected(t, pod, inject.Injection{Lock: "lock", Port: inject.DefaultPort, LabelPod: true, Health: "http://127.0.0.1:8080/ready", StepDownAfter: 20 * time.Second})
}

// The fencing annotation makes the agent lead only once the API server
// shows its pod as the holder: its flags carry -fencing. The pod is
// docs/workloads.md's.
func TestFencingAnnotationMakesTheAgentWaitForAdmission(t *testing.T) {
	block, err := testenv.DocBlockByID("../..", "docs/workloads.md", "fenced-pod")
	pod := docPod(t, namespace(t), block, err)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Spec.ServiceAccountName}}
	if err := k8s.Create(context.Background(), sa); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	checkInjected(t, pod, inject.Injection{Lock: "lock", Port: inject.DefaultPort, LabelPod: true, Fencing: true})
}

// docPod is the pod of a docs block (what testenv.DocBlockByID returns),
// in ns.
func docPod(t *testing.T, ns string, block testenv.DocBlock, err error) *corev1.Pod {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{}
	if err := yaml.UnmarshalStrict([]byte(block.Text), pod); err != nil {
		t.Fatal(err)
	}
	pod.Namespace = ns
	return pod
}

// A Deployment is stored as written; the pods created from its template
// (here as the ReplicaSet controller would, which envtest does not run)
// get the agent.
func TestDeploymentPodsGetTheAgent(t *testing.T) {
	ns := namespace(t)
	tmpl := appPod("", map[string]string{inject.LockAnnotation: "lock"})
	labels := map[string]string{"app": "worker"}
	tmpl.Labels = labels
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "worker"},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(3)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec},
		},
	}
	want := dep.Spec.Template.Spec.DeepCopy()
	if err := k8s.Create(context.Background(), dep); err != nil {
		t.Fatal(err)
	}
	if len(dep.Spec.Template.Spec.InitContainers) != 0 || len(dep.Spec.Template.Spec.Containers) != len(want.Containers) {
		t.Errorf("the Deployment's template was changed: %+v", dep.Spec.Template.Spec)
	}
	pod := &corev1.Pod{
		ObjectMeta: *dep.Spec.Template.ObjectMeta.DeepCopy(),
		Spec:       *dep.Spec.Template.Spec.DeepCopy(),
	}
	pod.Namespace, pod.GenerateName = ns, "worker-"
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "worker-1", UID: "00000000-0000-0000-0000-000000000001"}}
	if err := k8s.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	checkInjected(t, pod, defaults)
}

func TestPodWithoutAnnotationIsUntouched(t *testing.T) {
	ns := namespace(t)
	pod := appPod(ns, map[string]string{"unrelated": "x"})
	sent := pod.Spec.DeepCopy()
	if err := k8s.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if len(pod.Spec.InitContainers) != 0 || len(pod.Spec.Volumes) != 0 {
		t.Errorf("pod without %s was mutated: init %+v volumes %+v", inject.LockAnnotation, pod.Spec.InitContainers, pod.Spec.Volumes)
	}
	if env := pod.Spec.Containers[0].Env; len(env) != 0 {
		t.Errorf("pod without annotation got env %+v", env)
	}
	if len(pod.Spec.Containers[0].VolumeMounts) != len(sent.Containers[0].VolumeMounts) {
		t.Errorf("pod without annotation got volume mounts %+v", pod.Spec.Containers[0].VolumeMounts)
	}
}

// A pod that already has the agent (a second pass: reinvocation, or a pod
// copied from an injected one) is admitted as it is.
func TestSecondPassIsIdempotent(t *testing.T) {
	ns := namespace(t)
	first := appPod(ns, map[string]string{inject.LockAnnotation: "lock"})
	if err := k8s.Create(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	again := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "again", Annotations: first.Annotations}, Spec: *first.Spec.DeepCopy()}
	sent := again.Spec.DeepCopy()
	if err := k8s.Create(context.Background(), again); err != nil {
		t.Fatal(err)
	}
	checkInjected(t, again, defaults)
	if len(again.Spec.Volumes) != len(sent.Volumes) || len(again.Spec.Containers[0].Env) != len(sent.Containers[0].Env) {
		t.Errorf("second pass changed the pod: volumes %d -> %d, env %d -> %d",
			len(sent.Volumes), len(again.Spec.Volumes), len(sent.Containers[0].Env), len(again.Spec.Containers[0].Env))
	}

	// The handler itself, called on its own output, returns no patch.
	wh, err := inject.NewWebhook(k8s, scheme, agent, "")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(again)
	if err != nil {
		t.Fatal(err)
	}
	req := admission.Request{}
	req.Namespace = ns
	req.Object.Raw = raw
	if resp := wh.Handle(context.Background(), req); !resp.Allowed || len(resp.Patches) != 0 {
		t.Errorf("second pass: allowed=%t patches=%v, want allowed and none", resp.Allowed, resp.Patches)
	}
}

// Bad annotations get the pod rejected, with a message that names the
// annotation and what is wrong.
func TestBadAnnotationIsRejected(t *testing.T) {
	ns := namespace(t)
	cases := []struct {
		name        string
		annotations map[string]string
		ports       []corev1.ContainerPort
		want        string
	}{
		{"missing lock", map[string]string{inject.LockAnnotation: "nope"}, nil, `annotation redislock.io/lock: RedisLock "nope" not found in namespace`},
		{"invalid name", map[string]string{inject.LockAnnotation: "Not_A_Name"}, nil, `annotation redislock.io/lock: "Not_A_Name" is not a RedisLock name`},
		{"bad port", map[string]string{inject.LockAnnotation: "lock", inject.PortAnnotation: "99999"}, nil, `annotation redislock.io/agent-port: "99999" is not a port number`},
		{"bad label-pod", map[string]string{inject.LockAnnotation: "lock", inject.LabelPodAnnotation: "no"}, nil, `annotation redislock.io/label-pod: "no" is neither "true" nor "false"`},
		{"bad fencing", map[string]string{inject.LockAnnotation: "lock", inject.FencingAnnotation: "yes"}, nil, `annotation redislock.io/fencing: "yes" is neither "true" nor "false"`},
		{"port taken", map[string]string{inject.LockAnnotation: "lock"}, []corev1.ContainerPort{{ContainerPort: inject.DefaultPort}}, "container app already uses port 8090"},
		{"bad probe port", map[string]string{inject.LockAnnotation: "lock", inject.ProbePortAnnotation: "0"}, nil, `annotation redislock.io/agent-probe-port: "0" is not a port number`},
		{"probe port is the agent's", map[string]string{inject.LockAnnotation: "lock", inject.PortAnnotation: "9000", inject.ProbePortAnnotation: "9000"}, nil, "annotation redislock.io/agent-probe-port: 9000 is the agent's port too"},
		{"probe port taken", map[string]string{inject.LockAnnotation: "lock", inject.ProbePortAnnotation: "8080"}, nil, "container app already uses port 8080, the agent's probes'; set annotation redislock.io/agent-probe-port"},
		{"run-container missing", map[string]string{inject.LockAnnotation: "lock", inject.RunContainerAnnotation: "worker"}, nil, `annotation redislock.io/run-container: the pod has no container "worker"`},
		{"run-container without a command", map[string]string{inject.LockAnnotation: "lock", inject.RunContainerAnnotation: "app"}, nil, "container app sets no command, so the webhook cannot wrap it"},
		{"bad health signal", map[string]string{inject.LockAnnotation: "lock", inject.HealthAnnotation: "tcp://127.0.0.1:8080"}, nil, `annotation redislock.io/health: healthprobe: invalid health signal "tcp://127.0.0.1:8080": want http://HOST:PORT/PATH`},
		{"ready with run-container", map[string]string{inject.LockAnnotation: "lock", inject.HealthAnnotation: "ready", inject.RunContainerAnnotation: "app"}, nil, `annotation redislock.io/health: "ready" cannot gate a pod whose app runs only while it leads`},
		{"bad step-down wait", map[string]string{inject.LockAnnotation: "lock", inject.HealthAnnotation: "file:/run/ready", inject.StepDownAfterAnnotation: "soon"}, nil, `annotation redislock.io/step-down-after: "soon" is not a positive duration`},
		{"step-down wait without health", map[string]string{inject.LockAnnotation: "lock", inject.StepDownAfterAnnotation: "30s"}, nil, "annotation redislock.io/step-down-after: set without annotation redislock.io/health"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := appPod(ns, tc.annotations)
			if tc.ports != nil {
				pod.Spec.Containers[0].Ports = tc.ports
			}
			err := k8s.Create(context.Background(), pod)
			if err == nil {
				t.Fatalf("pod admitted: %+v", pod.Spec)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "denied the request") {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

// A RedisLock that exists but is not Ready admits the pod, with a warning.
func TestLockNotReadyWarns(t *testing.T) {
	ns := namespace(t)
	var rl v1alpha1.RedisLock
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "lock"}, &rl); err != nil {
		t.Fatal(err)
	}
	rl.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "SecretMissing", Message: "no secret", LastTransitionTime: metav1.Now()}}
	if err := k8s.Status().Update(context.Background(), &rl); err != nil {
		t.Fatal(err)
	}
	warnings := &warningRecorder{}
	cfg := rest.CopyConfig(restConfig)
	cfg.WarningHandlerWithContext = warnings
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	pod := appPod(ns, map[string]string{inject.LockAnnotation: "lock"})
	if err := c.Create(context.Background(), pod); err != nil {
		t.Fatalf("pod for a RedisLock that is not Ready was rejected: %v", err)
	}
	checkInjected(t, pod, defaults)
	want := "RedisLock lock is not Ready (SecretMissing: no secret); the agent waits for it"
	if got := warnings.all(); !slices.Contains(got, want) {
		t.Errorf("warnings %q lack %q", got, want)
	}
}

// warningRecorder keeps the API server's warnings.
type warningRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (w *warningRecorder) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

func (w *warningRecorder) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.seen)
}

// With run-container, the named container runs the agent with its own
// command after "--", from a binary an init container installs; no
// sidecar campaigns beside it, and the other containers find /leader as
// usual.
func TestRunContainerIsWrappedInTheAgent(t *testing.T) {
	ns := namespace(t)
	pod := appPod(ns, map[string]string{inject.LockAnnotation: "lock", inject.RunContainerAnnotation: "app"})
	pod.Spec.Containers[0].Command = []string{"/app", "serve"}
	pod.Spec.Containers[0].Args = []string{"--port=8080"}
	appProbe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8080)}}}
	pod.Spec.Containers[0].ReadinessProbe, pod.Spec.Containers[0].LivenessProbe = appProbe, appProbe.DeepCopy()
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "helper", Image: "example.test/helper:1"})
	if err := k8s.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if n := len(pod.Spec.InitContainers); n != 1 {
		t.Fatalf("%d init containers, want the installer alone: %+v", n, pod.Spec.InitContainers)
	}
	install := pod.Spec.InitContainers[0]
	if install.Name != inject.ContainerName || install.Image != image || install.RestartPolicy != nil || !equalResources(install.Resources, agent.Resources) ||
		!slices.Equal(install.Args, []string{"agent-install", inject.BinPath}) {
		t.Fatalf("init container %+v; want the agent image, with its resources, installing its binary at %s, run once", install, inject.BinPath)
	}
	app := pod.Spec.Containers[0]
	want := agentflags.Flags{Lock: "lock", HTTPAddress: fmt.Sprintf(":%d", inject.DefaultPort), LabelPod: true, LeaderFile: inject.LeaderFile, ClusterID: "test-cluster"}
	if len(app.Command) < 2 || app.Command[0] != inject.BinPath {
		t.Fatalf("app command %q; want %s agent ...", app.Command, inject.BinPath)
	}
	if got, rest := parseAgentArgs(t, app.Command[1:]); got != want || !slices.Equal(rest, []string{"/app", "serve"}) || !slices.Equal(app.Args, []string{"--port=8080"}) {
		t.Fatalf("app command %q args %q: the agent parses %+v, then runs %q; want %+v, then /app serve with its own args", app.Command, app.Args, got, rest, want)
	}
	envs := map[string]bool{}
	for _, e := range app.Env {
		envs[e.Name] = true
	}
	if !envs["POD_NAME"] || !envs["POD_NAMESPACE"] {
		t.Errorf("app env %+v lacks the agent's POD_NAME and POD_NAMESPACE", app.Env)
	}
	if app.ReadinessProbe != nil || app.LivenessProbe == nil || app.LivenessProbe.HTTPGet.Path != "/healthz" || app.StartupProbe == nil {
		t.Errorf("app probes readiness %+v liveness %+v startup %+v; want the agent's /healthz, no readiness (the app runs on the leader alone)", app.ReadinessProbe, app.LivenessProbe, app.StartupProbe)
	}
	if !slices.ContainsFunc(app.Ports, func(p corev1.ContainerPort) bool { return p.ContainerPort == inject.DefaultPort }) {
		t.Errorf("app ports %+v lack the agent's", app.Ports)
	}
	helper := pod.Spec.Containers[1]
	if !slices.ContainsFunc(helper.Env, func(e corev1.EnvVar) bool { return e.Name == inject.LeaderURLEnv }) {
		t.Errorf("helper env %+v lacks %s", helper.Env, inject.LeaderURLEnv)
	}
}

// equalResources compares requests and limits by quantity (the API server
// may write a quantity back in another form).
func equalResources(a, b corev1.ResourceRequirements) bool {
	eq := func(x, y corev1.ResourceList) bool {
		return maps.EqualFunc(x, y, func(p, q resource.Quantity) bool { return p.Cmp(q) == 0 })
	}
	return eq(a.Requests, b.Requests) && eq(a.Limits, b.Limits)
}

// A webhook injects only for the RedisLocks of its controller's lock class,
// and admits the pods of another class's locks untouched.
func TestWebhookInjectsOnlyForItsClass(t *testing.T) {
	ns := namespace(t)
	blue := &v1alpha1.RedisLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "blue", Labels: map[string]string{v1alpha1.ClassLabel: "blue"}},
		Spec: v1alpha1.RedisLockSpec{Redis: &v1alpha1.RedisConnectionSpec{Addrs: []string{"127.0.0.1:6379"}}}}
	if err := k8s.Create(context.Background(), blue); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		class, lock string
		injects     bool
	}{{"", "lock", true}, {"", "blue", false}, {"blue", "blue", true}, {"blue", "lock", false}} {
		wh, err := inject.NewWebhook(k8s, scheme, agent, tc.class)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := json.Marshal(appPod(ns, map[string]string{inject.LockAnnotation: tc.lock}))
		if err != nil {
			t.Fatal(err)
		}
		req := admission.Request{}
		req.Namespace = ns
		req.Object.Raw = raw
		resp := wh.Handle(context.Background(), req)
		if !resp.Allowed || (len(resp.Patches) > 0) != tc.injects {
			t.Errorf("webhook of class %q, pod of lock %q: allowed=%t, %d patches (%s); want injected=%t", tc.class, tc.lock, resp.Allowed, len(resp.Patches), resp.Result.Message, tc.injects)
		}
	}
}

// parseAgentArgs parses args (agent ...) as `redislock agent` does, with
// the flag set agentflags declares, and returns the flags and what
// follows them (the command after --).
func parseAgentArgs(t *testing.T, args []string) (agentflags.Flags, []string) {
	t.Helper()
	if len(args) == 0 || args[0] != "agent" {
		t.Fatalf("args %q do not run the agent", args)
	}
	var f agentflags.Flags
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	f.Bind(fs)
	if err := fs.Parse(args[1:]); err != nil {
		t.Fatalf("the agent's flags refuse %q: %v", args, err)
	}
	return f, fs.Args()
}
