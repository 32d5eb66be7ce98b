package e2e

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

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
	injected := func(pod string) {
		t.Helper()
		manifest := strings.ReplaceAll(podYAML, "NAME", pod)
		// The webhook server may still be starting: the API server then
		// admits the pod untouched (failurePolicy Ignore), so retry with a
		// fresh pod until one is injected.
		var out string
		waitUntil(t, 30*time.Second, "an injected pod", func() bool {
			_, _ = kubectl(t, "delete", "pod", "-n", ns, pod, "--ignore-not-found", "--wait=false")
			if _, err := kubectlIn(t, manifest, "create", "-n", ns, "-f", "-"); err != nil {
				return false
			}
			out, _ = kubectl(t, "get", "pod", "-n", ns, pod, "-o", "jsonpath={.spec.initContainers[*].name}")
			return out == inject.ContainerName
		})
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

const podYAML = `apiVersion: v1
kind: Pod
metadata:
  name: NAME
  annotations:
    redislock.io/lock: worker
spec:
  containers:
  - name: app
    image: example.test/app:1
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
