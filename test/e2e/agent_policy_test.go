package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/redislock/redislock/internal/testing/testenv"
)

// The agent's role lets its service account patch any pod of the
// namespace; config/rbac/agent/policy.yaml narrows that. Tried on the real
// API server as the agent of pod worker-a (impersonating its service
// account, with the pod name its token carries):
//   - by default (redislock-agent-pod-guard) it may change no pod's spec
//     and no other pod's leader label, but may still relabel another pod
//     (what Airflow's scheduler does to its workers); a namespace labelled
//     redislock.io/agent-policy=off opts out;
//   - where the namespace opts in (redislock-agent-pod-label), only its own
//     leader label, true or false, and nothing else of any pod.
//
// Users, and controllers running as service accounts of other namespaces,
// are not affected.
func TestAgentPolicyLeavesAPodOnlyItsOwnLeaderLabel(t *testing.T) {
	ns := newNamespace(t)
	applyAgentRole(t)
	mustKubectl(t, "apply", "-f", filepath.Join(repoRoot, "config", "rbac", "agent", "policy.yaml"))
	t.Cleanup(func() {
		_, _ = kubectl(t, "delete", "-f", filepath.Join(repoRoot, "config", "rbac", "agent", "policy.yaml"))
	})
	mustKubectl(t, "create", "serviceaccount", "-n", ns, "worker")
	mustKubectl(t, "create", "rolebinding", "-n", ns, "redislock-agent", "--clusterrole=redislock-agent", "--serviceaccount="+ns+":worker")
	for _, pod := range []string{"worker-a", "worker-b"} {
		mustKubectl(t, "run", "-n", ns, pod, "--image=example.test/worker:1", "--restart=Never", "--labels=app=worker")
	}
	cfg := rest.CopyConfig(apiServer(t))
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + ns + ":worker",
		Extra:    map[string][]string{"authentication.kubernetes.io/pod-name": {"worker-a"}},
	}
	asAgent, err := testenv.Client(cfg)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := testenv.Client(apiServer(t))
	if err != nil {
		t.Fatal(err)
	}
	patch := func(c client.Client, pod, body string) error {
		return c.Patch(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod}}, client.RawPatch(types.MergePatchType, []byte(body)))
	}
	image := func(pod, img string) string {
		return `{"spec":{"containers":[{"name":"` + pod + `","image":"` + img + `"}]}}`
	}
	// The policies reach the API server's cache a moment after they are
	// created: wait for the default one to refuse, then try the rest. Each
	// try names a new image: one the API server let through before would
	// be no change at all.
	tries := 0
	waitUntil(t, 30*time.Second, "the default policy to refuse a change of another pod's image", func() bool {
		tries++
		err := patch(asAgent, "worker-b", image("worker-b", fmt.Sprintf("example.test/evil:%d", tries)))
		return err != nil && strings.Contains(err.Error(), "pod worker-a may not change the spec of pod worker-b (policy redislock-agent-pod-guard)")
	})
	// try runs each case as the agent: "" wants the patch admitted,
	// anything else a refusal that says it.
	type patchCase struct{ name, pod, body, refusal string }
	try := func(mode string, cases []patchCase) {
		for _, tc := range cases {
			t.Run(mode+"/"+tc.name, func(t *testing.T) {
				err := patch(asAgent, tc.pod, tc.body)
				switch {
				case tc.refusal == "" && err != nil:
					t.Fatalf("refused: %v", err)
				case tc.refusal != "" && (err == nil || !strings.Contains(err.Error(), tc.refusal)):
					t.Fatalf("got %v; want a refusal saying %q", err, tc.refusal)
				}
			})
		}
	}
	try("by default", []patchCase{
		{"another pod's label", "worker-b", `{"metadata":{"labels":{"app":"other"}}}`, ""},
		{"another pod's annotation", "worker-b", `{"metadata":{"annotations":{"airflow/state":"running"}}}`, ""},
		{"its own leader label", "worker-a", `{"metadata":{"labels":{"redislock.io/leader":"true"}}}`, ""},
		{"its own leader label back", "worker-a", `{"metadata":{"labels":{"redislock.io/leader":"false"}}}`, ""},
		{"another pod's leader label", "worker-b", `{"metadata":{"labels":{"redislock.io/leader":"true"}}}`, "pod worker-a may change only its own redislock.io/leader label, not pod worker-b"},
		{"a leader label that is no boolean", "worker-a", `{"metadata":{"labels":{"redislock.io/leader":"maybe"}}}`, "the label redislock.io/leader is true or false"},
		{"its own image", "worker-a", image("worker-a", "example.test/evil:1"), "may not change the spec of pod worker-a"},
		{"another pod's owners", "worker-b", `{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"gone","uid":"00000000-0000-0000-0000-000000000001"}]}}`, "pod worker-a may not change the owners of pod worker-b"},
		{"its own leader label removed", "worker-a", `{"metadata":{"labels":{"redislock.io/leader":null}}}`, ""},
	})
	mustKubectl(t, "label", "namespace", ns, "redislock.io/agent-policy=off")
	waitUntil(t, 30*time.Second, "the opt-out to let the agent's role change another pod's image", func() bool {
		return patch(asAgent, "worker-b", image("worker-b", "example.test/other:1")) == nil
	})
	mustKubectl(t, "label", "--overwrite", "namespace", ns, "redislock.io/agent-policy=enforce")
	waitUntil(t, 30*time.Second, "the policy to refuse a relabel of another pod", func() bool {
		err := patch(asAgent, "worker-b", `{"metadata":{"labels":{"app":"worker"}}}`)
		return err != nil && strings.Contains(err.Error(), "redislock-agent-pod-label")
	})
	try("enforced", []patchCase{
		{"its own leader label", "worker-a", `{"metadata":{"labels":{"redislock.io/leader":"true"}}}`, ""},
		{"its own leader label back", "worker-a", `{"metadata":{"labels":{"redislock.io/leader":"false"}}}`, ""},
		{"a leader label that is no boolean", "worker-a", `{"metadata":{"labels":{"redislock.io/leader":"maybe"}}}`, "the label redislock.io/leader is true or false"},
		{"another pod's leader label", "worker-b", `{"metadata":{"labels":{"redislock.io/leader":"true"}}}`, "pod worker-a may change only its own redislock.io/leader label, not pod worker-b"},
		{"another label of its own", "worker-a", `{"metadata":{"labels":{"app":"evil"}}}`, "no other label"},
		{"an annotation", "worker-a", `{"metadata":{"annotations":{"x":"y"}}}`, "not its spec, annotations"},
		// Refused by both policies; either may answer.
		{"its image", "worker-a", image("worker-a", "example.test/evil:1"), "(policy redislock-agent-pod-"},
	})
	if err := patch(admin, "worker-b", `{"metadata":{"labels":{"app":"relabelled"}}}`); err != nil {
		t.Fatalf("a user's relabel, with no pod-bound token: %v; want it allowed", err)
	}
	// A controller in a pod of another namespace, allowed by RBAC to
	// patch pods here, is not bound by the policy.
	mustKubectl(t, "create", "rolebinding", "-n", ns, "operator", "--clusterrole=redislock-agent", "--serviceaccount=operators:rollouts")
	ocfg := rest.CopyConfig(apiServer(t))
	ocfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:operators:rollouts",
		Extra:    map[string][]string{"authentication.kubernetes.io/pod-name": {"rollouts-5d8c9"}},
	}
	operator, err := testenv.Client(ocfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := patch(operator, "worker-b", `{"metadata":{"labels":{"app":"rolled"}}}`); err != nil {
		t.Fatalf("a controller of another namespace relabelling a pod: %v; want it allowed", err)
	}
	if err := patch(operator, "worker-b", image("worker-b", "example.test/worker:2")); err != nil {
		t.Fatalf("a controller of another namespace changing a pod's image: %v; want it allowed", err)
	}
}
