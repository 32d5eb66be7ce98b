package e2e

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/redislock/redislock/internal/inject"
	"github.com/redislock/redislock/internal/proc"
	"github.com/redislock/redislock/internal/testenv"
)

// The controller binary serves the injecting webhook with a certificate it
// issues itself: the generated webhook configuration, pointed at it, gets
// its caBundle from the controller, and the API server then trusts it to
// inject the agent. A restarted controller reuses the stored certificate.
func TestControllerIssuesWebhookCertificateAndInjects(t *testing.T) {
	ns := newNamespace(t)
	p, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(p)
	config := "redislock-injector-" + ns
	applyWebhookConfiguration(t, config, ns, port)

	env := []string{"POD_NAMESPACE=" + ns}
	args := []string{
		"-agent-image=example.test/redislock:e2e",
		"-webhook-port=" + port,
		"-webhook-cert-dir=" + t.TempDir(),
		"-webhook-hosts=127.0.0.1",
		"-webhook-configuration=" + config,
	}
	ctrl := startController(t, env, args...)
	waitUntil(t, 30*time.Second, "the controller to set the caBundle", func() bool {
		out, _ := kubectl(t, "get", "mutatingwebhookconfiguration", config, "-o", "jsonpath={.webhooks[0].clientConfig.caBundle}")
		return out != ""
	})
	cert := mustKubectl(t, "get", "secret", "-n", ns, "redislock-webhook-cert", "-o", "jsonpath={.data.tls\\.crt}")

	if out, err := kubectlIn(t, lockYAML, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply RedisLock: %v\n%s", err, out)
	}
	k8s, err := testenv.Client(testEnv.Config)
	if err != nil {
		t.Fatal(err)
	}
	injected := func(pod string) {
		t.Helper()
		if _, err := testenv.CreateInjectedPod(context.Background(), k8s, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod, Annotations: map[string]string{inject.LockAnnotation: "worker"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.test/app:1"}}},
		}, 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	injected("app-1")

	if err := ctrl.Stop(30 * time.Second); err != nil {
		t.Fatalf("controller after SIGTERM: %v", err)
	}
	startController(t, env, args...)
	injected("app-2")
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

// applyWebhookConfiguration applies config/webhook's generated
// configuration as name, pointed at 127.0.0.1:port and limited to pods of
// namespace ns, so other tests' pods are left alone.
func applyWebhookConfiguration(t *testing.T, name, ns, port string) {
	t.Helper()
	manifest, err := testenv.LocalWebhookConfiguration(repoRoot, name, "https://"+net.JoinHostPort("127.0.0.1", port), ns)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := kubectlIn(t, string(manifest), "apply", "-f", "-"); err != nil {
		t.Fatalf("apply webhook configuration: %v\n%s", err, res)
	}
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "mutatingwebhookconfiguration", name) })
}
