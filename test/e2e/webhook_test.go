package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/redislock/redislock/internal/inject"
	"github.com/redislock/redislock/internal/testing/testenv"
)

// The controller binary serves the injecting webhook with a certificate it
// issues itself: the generated webhook configuration, pointed at it, gets
// its caBundle from the controller, and the API server then trusts it to
// inject the agent. A restarted controller reuses the stored certificate.
func TestControllerIssuesWebhookCertificateAndInjects(t *testing.T) {
	ns := newNamespace(t)
	config := "redislock-injector-" + ns
	args := append([]string{"-agent-image=example.test/redislock:e2e"}, applyWebhook(t, config, ns).Args...)
	env := []string{"POD_NAMESPACE=" + ns}
	ctrl := startController(t, env, args...)
	waitUntil(t, 30*time.Second, "the controller to set the caBundle", func() bool {
		out, _ := kubectl(t, "get", "mutatingwebhookconfiguration", config, "-o", "jsonpath={.webhooks[0].clientConfig.caBundle}")
		return out != ""
	})
	cert := mustKubectl(t, "get", "secret", "-n", ns, "redislock-webhook-cert", "-o", "jsonpath={.data.tls\\.crt}")

	if out, err := kubectlIn(t, lockYAML, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply RedisLock: %v\n%s", err, out)
	}
	k8s, err := testenv.Client(apiServer(t))
	if err != nil {
		t.Fatal(err)
	}
	injected := func(pod string) corev1.Container {
		t.Helper()
		agent, err := testenv.CreateInjectedPod(context.Background(), k8s, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod, Annotations: map[string]string{inject.LockAnnotation: "worker"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.test/app:1"}}},
		}, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return agent
	}
	defaults, first := inject.DefaultResources(), injected("app-1")
	if got, want := first.Resources.Limits.Memory().String(), defaults.Limits.Memory().String(); got != want {
		t.Errorf("agent memory limit %s, want the default %s", got, want)
	}

	if err := ctrl.Stop(30 * time.Second); err != nil {
		t.Fatalf("controller after SIGTERM: %v", err)
	}
	// Restarted with resource flags, which reach the agents it injects.
	startController(t, env, append(args, "-agent-memory-limit=96Mi", "-agent-cpu-request=")...)
	agent := injected("app-2")
	if got := agent.Resources.Limits.Memory().String(); got != "96Mi" {
		t.Errorf("agent memory limit %s, want -agent-memory-limit's 96Mi", got)
	}
	if _, set := agent.Resources.Requests[corev1.ResourceCPU]; set {
		t.Errorf("agent cpu request %v, want none (-agent-cpu-request empty)", agent.Resources.Requests)
	}
	if again := mustKubectl(t, "get", "secret", "-n", ns, "redislock-webhook-cert", "-o", "jsonpath={.data.tls\\.crt}"); again != cert {
		t.Errorf("a restarted controller issued a new certificate instead of reusing the stored one")
	}
}

const lockYAML = `apiVersion: redislock.io/v1alpha1
kind: RedisLock
metadata:
  name: worker
spec:
  redis:
    addrs: ["127.0.0.1:1"]
`

// applyWebhook applies config/webhook's generated configuration as name,
// served by a local controller (testenv.NewLocalWebhook) and limited to
// pods of namespace ns, so other tests' pods are left alone.
func applyWebhook(t *testing.T, name, ns string) testenv.LocalWebhook {
	t.Helper()
	webhook, err := testenv.NewLocalWebhook(repoRoot, name, ns, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if res, err := kubectlIn(t, string(webhook.Manifest), "apply", "-f", "-"); err != nil {
		t.Fatalf("apply webhook configuration: %v\n%s", err, res)
	}
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "mutatingwebhookconfiguration", name) })
	return webhook
}
