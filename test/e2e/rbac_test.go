package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/cert"

	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
)

// kubeconfigAs writes a copy of the admin kubeconfig that impersonates
// the service account ns/sa: what the API server authorizes is then that
// account's RBAC, as for the controller's pod.
func kubeconfigAs(t *testing.T, ns, sa string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(adminKubeconfig(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range cfg.AuthInfos {
		a.Impersonate = "system:serviceaccount:" + ns + ":" + sa
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// controllerArgs returns the args of the controller container of the
// Deployment in manifest.
func controllerArgs(t *testing.T, manifest string) []string {
	t.Helper()
	for _, d := range docs(manifest) {
		if d["kind"] == "Deployment" {
			if args := containerArgs(d, "controller"); args != nil {
				return args
			}
		}
	}
	t.Fatalf("no controller container in:\n%s", manifest)
	return nil
}

// containerArgs returns the args of the container called name of
// Deployment d, or nil.
func containerArgs(d map[string]any, name string) []string {
	spec := d["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	for _, c := range spec["containers"].([]any) {
		if c := c.(map[string]any); c["name"] == name {
			var args []string
			for _, a := range c["args"].([]any) {
				args = append(args, a.(string))
			}
			return args
		}
	}
	return nil
}

// The controller runs with exactly the RBAC the chart renders, in each of
// its modes: the chart's RBAC, service account, webhook configuration and
// (for leaderElection.mode=redislock) its own RedisLock are applied, and the
// controller runs with the Deployment's args as its service account
// (impersonated). It reconciles the RedisLocks of its class where it may,
// keeps its certificate and its election, and logs no forbidden request;
// with one rule taken away it stops and says which.
func TestChartRBACIsEnoughForEachMode(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{Password: "pw"})
	certDir := t.TempDir()
	crt, key, err := cert.GenerateSelfSignedCertKey("localhost", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for f, b := range map[string][]byte{"tls.crt": crt, "tls.key": key} {
		if err := os.WriteFile(filepath.Join(certDir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name string
		// set are the chart values; watched says whether the lock
		// namespace is watched, unwatched is another namespace's lock.
		set       []string
		watchOnly bool
		// secret is the webhook certificate's Secret the controller
		// must write, "" for none.
		secret string
		// remove is a Role or ClusterRole to delete for the second run,
		// and forbidden what the controller must then say.
		remove, forbidden string
	}{
		{
			name: "cluster-wide, Lease election, self-issued webhook certificate",
			set:  []string{"leaderElection.mode=lease", "webhook.certs=self"},
			// The webhook certificate's Secret is granted by a Role in
			// the release namespace.
			secret: "r1-redislock-webhook-cert",
			remove: "role/r1-redislock-controller-election", forbidden: `cannot create resource "secrets"`,
		},
		{
			name:      "watchNamespaces with Roles, RedisLock election, cert-manager certificate",
			set:       []string{"leaderElection.mode=redislock", "redis.addrs={" + s.Addr + "}", "redis.existingSecret=redis-auth", "webhook.certs=cert-manager"},
			watchOnly: true,
			remove:    "role/r2-redislock-controller", forbidden: `redislocks.redislock.io "r2-redislock-leader" is forbidden`,
		},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			release := []string{"r1", "r2"}[i]
			ns, locks, other := newNamespace(t), newNamespace(t), newNamespace(t)
			class := "rbac-" + release
			set := append([]string{"lockClass=" + class, "agentRole.create=false", "image.repository=example.test/redislock"}, tc.set...)
			if tc.watchOnly {
				set = append(set, "watchNamespaces={"+locks+"}")
			}
			args := []string{"template", release, chartDir(), "-n", ns}
			for _, v := range set {
				args = append(args, "--set", v)
			}
			manifest, err := helm(t, args...)
			if err != nil {
				t.Fatalf("helm template: %v\n%s", err, manifest)
			}
			var apply []string
			for _, d := range strings.Split(manifest, "\n---") {
				if kind := kindOf(d); slices.Contains([]string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "MutatingWebhookConfiguration", "RedisLock"}, kind) {
					apply = append(apply, d)
				}
			}
			for _, n := range []string{ns, locks, other} {
				mustKubectl(t, "create", "secret", "generic", "-n", n, "redis-auth", "--from-literal=password=pw")
			}
			if _, err := kubectlIn(t, strings.Join(apply, "\n---"), "apply", "-f", "-"); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_, _ = kubectlIn(t, strings.Join(apply, "\n---"), "delete", "--ignore-not-found", "--wait=false", "-f", "-")
			})
			lock := `apiVersion: redislock.io/v1alpha1
kind: RedisLock
metadata:
  name: guarded
  labels: {redislock.io/class: ` + class + `}
spec:
  redis:
    addrs: ["` + s.Addr + `"]
    passwordSecretRef: {name: redis-auth, key: password}
`
			for _, n := range []string{locks, other} {
				if out, err := kubectlIn(t, lock, "apply", "-n", n, "-f", "-"); err != nil {
					t.Fatalf("%v\n%s", err, out)
				}
			}
			// Another class's lock, and one without a class: not this
			// controller's.
			for name, labels := range map[string]string{"other-class": "{redislock.io/class: not-" + class + "}", "unclassed": "{}"} {
				l := strings.Replace(strings.Replace(lock, "name: guarded", "name: "+name, 1), "labels: {redislock.io/class: "+class+"}", "labels: "+labels, 1)
				if out, err := kubectlIn(t, l, "apply", "-n", locks, "-f", "-"); err != nil {
					t.Fatalf("%v\n%s", err, out)
				}
			}
			run := func() []string {
				return append(controllerArgs(t, manifest)[1:], "-kubeconfig="+kubeconfigAs(t, ns, release+"-redislock-controller"),
					"-metrics-bind-address=0", "-health-probe-bind-address=0", "-webhook-port="+strings.Split(freeAddr(t), ":")[1], "-webhook-cert-dir="+certDir)
			}
			ctrl := startController(t, []string{"POD_NAMESPACE=" + ns, "POD_NAME=" + release + "-0"}, run()...)
			readyOf := func(n, name string) string {
				out, _ := kubectl(t, "get", "-n", n, "redislock", name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
				return out
			}
			ready := func(n string) string { return readyOf(n, "guarded") }
			waitUntil(t, 60*time.Second, "the lock of the controller's class Ready", func() bool { return ready(locks) == "True" })
			if tc.watchOnly {
				// Reconciled by now, had the controller seen it.
				if got := ready(other); got != "" {
					t.Errorf("the lock outside watchNamespaces has Ready=%q; want no status", got)
				}
				waitUntil(t, 30*time.Second, "the controller's own RedisLock held", func() bool {
					out, _ := kubectl(t, "get", "-n", ns, "redislock", release+"-redislock-leader", "-o", "jsonpath={.status.holderIdentity}")
					return out != ""
				})
			} else {
				waitUntil(t, 30*time.Second, "the other namespace's lock Ready", func() bool { return ready(other) == "True" })
			}
			// Reconciled by now, were they the controller's (-lock-class).
			for _, name := range []string{"other-class", "unclassed"} {
				if got := readyOf(locks, name); got != "" {
					t.Errorf("the lock %s, not of class %s, has Ready=%q; want no status", name, class, got)
				}
			}
			if tc.secret != "" {
				waitUntil(t, 30*time.Second, "the webhook configuration's caBundle set", func() bool {
					out, _ := kubectl(t, "get", "mutatingwebhookconfiguration", release+"-redislock-injector", "-o", "jsonpath={.webhooks[0].clientConfig.caBundle}")
					return out != ""
				})
				mustKubectl(t, "get", "secret", "-n", ns, tc.secret)
			}
			if log := ctrl.LogTail(1 << 20); strings.Contains(log, "forbidden") {
				t.Fatalf("the controller was refused a request with the chart's RBAC:\n%s", log)
			}
			if err := ctrl.Kill(); err != nil {
				t.Fatal(err)
			}

			mustKubectl(t, "delete", "-n", ns, tc.remove)
			if tc.secret != "" {
				mustKubectl(t, "delete", "secret", "-n", ns, tc.secret)
			}
			without := startController(t, []string{"POD_NAMESPACE=" + ns, "POD_NAME=" + release + "-1"}, run()...)
			waitUntil(t, 60*time.Second, "the controller without "+tc.remove+" to say what it may not do", func() bool {
				return strings.Contains(without.LogTail(1<<20), tc.forbidden)
			})
		})
	}
}

// kindOf returns the kind of the YAML document d.
func kindOf(d string) string {
	for _, line := range strings.Split(d, "\n") {
		if k, ok := strings.CutPrefix(line, "kind: "); ok {
			return strings.TrimSpace(k)
		}
	}
	return ""
}
