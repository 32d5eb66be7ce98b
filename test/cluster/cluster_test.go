package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/template"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/internal/leaderhttp"
)

// Deadlines on a loaded 2-core machine. Each is far above what it takes
// (seconds; the test logs each time): passing them means something is
// broken, not slow.
const (
	installTimeout = 2 * time.Minute
	rolloutTimeout = 2 * time.Minute
	leaderTimeout  = 30 * time.Second
)

const (
	release   = "rl"
	releaseNS = "redislock-system"
	appNS     = "shop"
	app       = "worker"
	agentPort = 8090
)

// The whole story of a user, in order: install the chart, run an annotated
// Deployment, then disturb it every way a cluster does.
func TestChartOnARealCluster(t *testing.T) {
	needCluster(t)
	t.Cleanup(func() { uninstall(t) })

	// helm install --wait alone, as a Helm user runs it: the chart's
	// post-install hook (redislock webhook-wait) holds it until the
	// webhook answers through its Service; what follows goes at once.
	start := time.Now()
	hook := watchHook(releaseNS)
	mustHelm(t, installTimeout+10*time.Second, append(readmeInstall(t),
		"--wait", "--timeout", installTimeout.String(),
		"--set", "leaderElection.mode=redislock", "--set", "redis.addrs={"+cluster.RedisAddr+"}")...)
	t.Logf("helm install --wait: returned in %.1fs", time.Since(start).Seconds())
	logAvailability(t, releaseNS, release+"-redislock-controller")
	webhookAnswersAtOnce(t)
	deployAndElect(t, func() {
		hook.report(t, releaseNS, "app.kubernetes.io/instance="+release+",app.kubernetes.io/component=controller")
	})

	t.Run("with nothing disturbed the label stays on one pod", func(t *testing.T) { steadyOneLeader(t, appNS, "app="+app, 3*time.Second) })
	t.Run("the agent is injected as a native sidecar and runs", func(t *testing.T) {
		sidecarsRun(t, releaseNS, release+"-redislock-controller")
	})
	t.Run("/leader in each pod agrees with the label and the RedisLock", func(t *testing.T) { leaderAnswersAgree(t) })
	t.Run("deleting the leader pod moves the label", func(t *testing.T) {
		start := deleteTheLeaderPod(t)
		steadyOneLeader(t, appNS, "app="+app, time.Second)
		leaderAnswersAgree(t)
		t.Logf("3 Ready again %.1fs after the delete", time.Since(start).Seconds())
	})
	t.Run("rollout restart hands over to a new pod", func(t *testing.T) {
		ps, _ := mustPods(t)
		start := time.Now()
		mustKubectl(t, "", "-n", appNS, "rollout", "restart", "deployment/"+app)
		mustKubectl(t, "", "-n", appNS, "rollout", "status", "deployment/"+app, "--timeout", rolloutTimeout.String())
		waitFor(t, leaderTimeout, "the old pods gone", func(ctx context.Context) (bool, string) {
			now, err := pods(ctx, appNS, "app="+app)
			if err != nil {
				return false, err.Error()
			}
			for _, p := range now {
				if slices.ContainsFunc(ps, func(o corev1.Pod) bool { return o.Name == p.Name }) {
					return false, p.Name + " still there"
				}
			}
			return true, ""
		})
		waitForOneLeader(t, 3, "")
		leaderAnswersAgree(t)
		t.Logf("rollout restart: 3 new pods Ready with one leader in %.1fs", time.Since(start).Seconds())
	})
	t.Run("scale to 0 and back elects a leader again", func(t *testing.T) {
		mustKubectl(t, "", "-n", appNS, "scale", "deployment/"+app, "--replicas=0")
		waitFor(t, rolloutTimeout, "no pods left", func(ctx context.Context) (bool, string) {
			ps, err := pods(ctx, appNS, "app="+app)
			if err != nil {
				return false, err.Error()
			}
			return len(ps) == 0, fmt.Sprintf("%d pods", len(ps))
		})
		start := time.Now()
		mustKubectl(t, "", "-n", appNS, "scale", "deployment/"+app, "--replicas=3")
		waitForOneLeader(t, 0, "")
		t.Logf("scaled 0 -> 3: first leader labelled %.1fs after the scale", time.Since(start).Seconds())
		waitForOneLeader(t, 3, "")
		leaderAnswersAgree(t)
	})
	t.Run("examples/python-worker: one pod leads and only it runs the worker", func(t *testing.T) { pythonWorker(t) })
	t.Run("the controller's own election in redislock mode survives killing its leader", func(t *testing.T) { controllerFailover(t) })
	t.Run("the metrics are served over HTTPS to a service account bound to the reader role, and to no one without a token", func(t *testing.T) { metricsNeedAToken(t) })
	t.Run("the chart's RBAC is enough, and no more than the agent and the controller need", func(t *testing.T) { rbacIsEnough(t) })
}

// readmeInstall is the README's helm install (its block id=helm-install),
// as helm's arguments, with this test's release name; the test adds only
// --wait (to time it) and the controller's election on the cluster's Redis.
func readmeInstall(t *testing.T) []string {
	t.Helper()
	want := []string{"helm", "install", "redislock", "charts/redislock", "-n", releaseNS, "--create-namespace"}
	docCommand(t, "README.md", "helm-install", want)
	args := slices.Clone(want[1:])
	args[1] = release
	return args
}

func uninstall(t *testing.T) {
	for _, args := range [][]string{
		{"delete", "namespace", appNS, "--ignore-not-found", "--wait", "--timeout=90s"},
	} {
		if out, err := kubectl.Run(context.Background(), "", args...); err != nil {
			t.Errorf("%v\n%s", err, out)
		}
	}
	mustHelm(t, 2*time.Minute, "uninstall", release, "-n", releaseNS, "--wait", "--timeout", "90s")
	if out, err := kubectl.Run(context.Background(), "", "delete", "namespace", releaseNS, "--ignore-not-found", "--wait", "--timeout=90s"); err != nil {
		t.Errorf("%v\n%s", err, out)
	}
}

// deployWorkload applies testdata/workload.yaml, what a user writes.
func deployWorkload(t *testing.T) {
	t.Helper()
	tmpl, err := template.ParseFiles(filepath.Join("testdata", "workload.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := tmpl.Execute(&b, map[string]string{"NS": appNS, "App": app, "RedisAddr": cluster.RedisAddr, "AppImage": cluster.AppImage}); err != nil {
		t.Fatal(err)
	}
	mustKubectl(t, b.String(), "apply", "-f", "-")
}

// deployAndElect applies the workload (deployWorkload), then runs
// afterApply unless it is nil, then starts sampling the leader label
// (startSampler), whose check runs when t's test ends (t.Cleanup), and
// waits until the workload's 3 pods are Ready with one leader. It logs how
// long that took from the apply.
func deployAndElect(t *testing.T, afterApply func()) {
	t.Helper()
	start := time.Now()
	deployWorkload(t)
	if afterApply != nil {
		afterApply()
	}
	sampler := startSampler(appNS, "app="+app)
	t.Cleanup(func() { sampler.check(t) })
	waitForOneLeader(t, 3, "")
	t.Logf("Deployment of 3: all Ready with one leader %.1fs after kubectl apply", time.Since(start).Seconds())
}

func mustPods(t *testing.T) ([]corev1.Pod, string) {
	t.Helper()
	ps, err := pods(context.Background(), appNS, "app="+app)
	if err != nil {
		t.Fatal(err)
	}
	_, all := leaders(ps)
	return ps, all
}

// deleteTheLeaderPod deletes the pod labelled leader, waits until another
// is labelled and 3 are Ready, and returns when it deleted it.
func deleteTheLeaderPod(t *testing.T) time.Time {
	t.Helper()
	ps, _ := mustPods(t)
	old, _ := leaders(ps)
	if len(old) != 1 {
		t.Fatalf("%d leaders", len(old))
	}
	start := time.Now()
	if err := client.CoreV1().Pods(appNS).Delete(context.Background(), old[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	d := waitForOneLeader(t, 0, old[0].Name)
	t.Logf("leader pod %s deleted: new leader labelled after %.2fs", old[0].Name, d.Seconds())
	waitForOneLeader(t, 3, "")
	return start
}

// waitForOneLeader waits until exactly one live pod other than not is
// labelled leader and, with n > 0, n pods are Ready; it returns how long.
func waitForOneLeader(t *testing.T, n int, not string) time.Duration {
	t.Helper()
	what := "one leader"
	if n > 0 {
		what = fmt.Sprintf("%d Ready pods with one leader", n)
	}
	return waitFor(t, rolloutTimeout, what, func(ctx context.Context) (bool, string) {
		ps, err := pods(ctx, appNS, "app="+app)
		if err != nil {
			return false, err.Error()
		}
		ls, all := leaders(ps)
		ok := len(ls) == 1 && ls[0].Name != not && ls[0].DeletionTimestamp == nil && (n == 0 || (ready(ps) == n && len(ps) == n))
		return ok, all
	})
}

// sidecarsRun checks that every app pod runs the agent as a native
// sidecar, from the image of the controller's Deployment ns/deployment.
func sidecarsRun(t *testing.T, ns, deployment string) {
	t.Helper()
	image := mustKubectl(t, "", "-n", ns, "get", "deployment", deployment, "-o", "jsonpath={.spec.template.spec.containers[0].image}")
	ps, _ := mustPods(t)
	for _, p := range ps {
		i := slices.IndexFunc(p.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == "redislock-agent" })
		if i < 0 {
			t.Errorf("%s: no redislock-agent init container: %v", p.Name, p.Spec.InitContainers)
			continue
		}
		c := p.Spec.InitContainers[i]
		if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			t.Errorf("%s: the agent is not a native sidecar (restartPolicy %v)", p.Name, c.RestartPolicy)
		}
		if c.Image != image {
			t.Errorf("%s: agent image %s, want the controller's %s", p.Name, c.Image, image)
		}
		for _, s := range p.Status.InitContainerStatuses {
			if s.Name == c.Name && (s.State.Running == nil || s.Started == nil || !*s.Started || !s.Ready) {
				t.Errorf("%s: agent not running and ready: %+v", p.Name, s.State)
			}
		}
	}
}

// leaderAnswersAgree asks each pod's /leader through the API server's pod
// proxy: one pod answers leading, as itself (its name, from the downward
// API), the one labelled leader; all name it as holder, as the RedisLock's
// status does once the controller has seen it.
func leaderAnswersAgree(t *testing.T) {
	t.Helper()
	ps, all := mustPods(t)
	ls, _ := leaders(ps)
	if len(ls) != 1 {
		t.Fatalf("want one leader: %s", all)
	}
	for _, p := range ps {
		st := leaderOf(t, p.Name)
		if st.Identity != p.Name {
			t.Errorf("%s: /leader identity %q", p.Name, st.Identity)
		}
		if st.Leading != (p.Name == ls[0].Name) || st.Holder != ls[0].Name || st.Error != "" {
			t.Errorf("%s: /leader says leading=%v holder=%q error=%q; the label names %s", p.Name, st.Leading, st.Holder, st.Error, ls[0].Name)
		}
	}
	waitFor(t, leaderTimeout, "RedisLock status names the labelled leader", func(ctx context.Context) (bool, string) {
		var lock v1alpha1.RedisLock
		if err := rl.Get(ctx, types.NamespacedName{Namespace: appNS, Name: app}, &lock); err != nil {
			return false, err.Error()
		}
		return lock.Status.HolderIdentity == ls[0].Name, "holder " + lock.Status.HolderIdentity
	})
}

// leaderOf is pod's /leader answer; a standby answers 503 with the same JSON.
func leaderOf(t *testing.T, pod string) leaderhttp.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	body, err := client.CoreV1().RESTClient().Get().Namespace(appNS).Resource("pods").
		Name(fmt.Sprintf("%s:%d", pod, agentPort)).SubResource("proxy").Suffix("leader").DoRaw(ctx)
	var st leaderhttp.Status
	if jerr := json.Unmarshal(body, &st); jerr != nil {
		t.Fatalf("%s: /leader: %v (%v): %s", pod, jerr, err, body)
	}
	return st
}

// controllerFailover deletes the pod that holds the controller's RedisLock
// and times the other replica's taking over; the webhook, served by the new
// leader or not, still injects.
func controllerFailover(t *testing.T) {
	key := types.NamespacedName{Namespace: releaseNS, Name: release + "-redislock-leader"}
	var holder string
	waitFor(t, leaderTimeout, "the controller's RedisLock has a holder", func(ctx context.Context) (bool, string) {
		var lock v1alpha1.RedisLock
		if err := rl.Get(ctx, key, &lock); err != nil {
			return false, err.Error()
		}
		holder = lock.Status.HolderIdentity
		return holder != "", "no holder"
	})
	start := time.Now()
	if err := client.CoreV1().Pods(releaseNS).Delete(context.Background(), holder, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete the controller's leader %s: %v", holder, err)
	}
	var next string
	d := waitFor(t, leaderTimeout, "another controller pod holds the lock", func(ctx context.Context) (bool, string) {
		var lock v1alpha1.RedisLock
		if err := rl.Get(ctx, key, &lock); err != nil {
			return false, err.Error()
		}
		next = lock.Status.HolderIdentity
		return next != "" && next != holder, "holder " + next
	})
	t.Logf("controller leader %s deleted: %s holds the lock after %.2fs", holder, next, d.Seconds())
	mustKubectl(t, "", "-n", releaseNS, "rollout", "status", "deployment/"+release+"-redislock-controller", "--timeout", rolloutTimeout.String())
	t.Logf("controller Deployment Available again %.1fs after the delete", time.Since(start).Seconds())
	// The new leader reconciles: a new RedisLock gets a Ready condition.
	mustKubectl(t, fmt.Sprintf("apiVersion: redislock.io/v1alpha1\nkind: RedisLock\nmetadata: {name: after-failover, namespace: %s}\nspec:\n  redis: {addrs: [%q]}\n", appNS, cluster.RedisAddr), "apply", "-f", "-")
	waitFor(t, leaderTimeout, "a RedisLock made after the failover gets Ready", func(ctx context.Context) (bool, string) {
		var lock v1alpha1.RedisLock
		if err := rl.Get(ctx, types.NamespacedName{Namespace: appNS, Name: "after-failover"}, &lock); err != nil {
			return false, err.Error()
		}
		for _, c := range lock.Status.Conditions {
			if c.Type == "Ready" {
				return c.Status == metav1.ConditionTrue, c.Reason + ": " + c.Message
			}
		}
		return false, "no Ready condition"
	})
}

// rbacIsEnough: no pod of ours logged a forbidden error, and the service
// accounts of the agent and of the controller can do what each does and
// nothing near it.
func rbacIsEnough(t *testing.T) {
	for _, c := range []struct{ ns, selector, container string }{
		{releaseNS, "app.kubernetes.io/name=redislock", "controller"},
		{appNS, "app=" + app, "redislock-agent"},
	} {
		out := mustKubectl(t, "", "-n", c.ns, "logs", "-l", c.selector, "-c", c.container, "--tail=-1", "--prefix")
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(strings.ToLower(line), "forbidden") {
				t.Errorf("%s/%s: %s", c.ns, c.container, line)
			}
		}
	}
	agent := "system:serviceaccount:" + appNS + ":" + app
	controllerSA := strings.TrimSpace(mustKubectl(t, "", "-n", releaseNS, "get", "pods", "-l", "app.kubernetes.io/name=redislock,app.kubernetes.io/component=controller",
		"-o", "jsonpath={.items[0].spec.serviceAccountName}"))
	controller := "system:serviceaccount:" + releaseNS + ":" + controllerSA
	for _, c := range []struct {
		who, ns, verb, resource string
		want                    bool
	}{
		{agent, appNS, "patch", "pods", true},
		{agent, appNS, "get", "redislocks.redislock.io", true},
		{agent, appNS, "get", "redisconnections.redislock.io", true},
		// The agent's role holds no Secret: its lock names none here.
		{agent, appNS, "get", "secrets", false},
		{agent, appNS, "list", "secrets", false},
		{agent, appNS, "watch", "redislocks.redislock.io", false},
		{agent, appNS, "update", "redislocks.redislock.io/status", false},
		{agent, appNS, "delete", "pods", false},
		{agent, appNS, "create", "pods", false},
		{agent, appNS, "create", "leases.coordination.k8s.io", false},
		// The controller reads Redis passwords from Secrets named by
		// connections in any namespace, and nothing else of them.
		{controller, appNS, "get", "secrets", true},
		{controller, appNS, "list", "secrets", false},
		{controller, appNS, "update", "secrets", false},
		{controller, appNS, "create", "secrets", false},
		{controller, appNS, "watch", "redislocks.redislock.io", true},
		{controller, appNS, "patch", "redislocks.redislock.io/status", true},
		{controller, appNS, "update", "redislocks.redislock.io", false},
		{controller, appNS, "delete", "redislocks.redislock.io", false},
		{controller, appNS, "create", "redislocks.redislock.io", false},
		{controller, appNS, "get", "pods", false},
		{controller, appNS, "patch", "pods", false},
		{controller, appNS, "create", "pods", false},
		{controller, appNS, "create", "leases.coordination.k8s.io", false},
		{controller, releaseNS, "update", "secrets/some-other-secret", false},
		{controller, "", "update", "mutatingwebhookconfigurations.admissionregistration.k8s.io/some-other-webhook", false},
		{controller, "", "get", "namespaces/default", false},
		// metrics.secure: the controller reviews scrapers' tokens.
		{controller, "", "create", "tokenreviews.authentication.k8s.io", true},
		{controller, "", "create", "subjectaccessreviews.authorization.k8s.io", true},
		{agent, "", "create", "tokenreviews.authentication.k8s.io", false},
	} {
		args := []string{"auth", "can-i", c.verb, c.resource, "--as", c.who}
		if c.ns != "" {
			args = append(args, "-n", c.ns)
		}
		out, err := kubectl.Run(context.Background(), "", args...)
		// The answer is the last line; warnings may come before it.
		lines := strings.Split(strings.TrimSpace(out), "\n")
		answer := strings.TrimSpace(lines[len(lines)-1])
		got := answer == "yes"
		if err != nil && !apierrors.IsForbidden(err) && answer != "no" {
			t.Errorf("can-i %s %s: %v %s", c.verb, c.resource, err, out)
			continue
		}
		if got != c.want {
			t.Errorf("%s: can-i %s %s in %q = %v, want %v", c.who, c.verb, c.resource, c.ns, got, c.want)
		}
	}
}
