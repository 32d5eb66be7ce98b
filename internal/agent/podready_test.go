package agent

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/internal/agentflags"
	"github.com/redislock/redislock/internal/healthprobe"
	"github.com/redislock/redislock/internal/leaderhttp"
	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/internal/testing/testenv"
)

// podReady counts the app containers only: not the agent's own, and not
// before the kubelet has reported any.
func TestPodReadyCountsTheAppContainersOnly(t *testing.T) {
	status := func(ready ...bool) corev1.PodStatus {
		var st corev1.PodStatus
		for i, r := range ready {
			st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{Name: []string{"app", "cache"}[i], Ready: r})
		}
		return st
	}
	withAgent := func(st corev1.PodStatus, ready bool) corev1.PodStatus {
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{Name: agentflags.ContainerName, Ready: ready})
		return st
	}
	for _, tc := range []struct {
		name   string
		status corev1.PodStatus
		want   string // "" for healthy, else a part of the reason
	}{
		{"all ready", status(true, true), ""},
		{"one not ready", status(true, false), "container cache of pod p is not Ready"},
		{"the agent not ready", withAgent(status(true), false), ""},
		{"only the agent ready", withAgent(status(false), true), "container app of pod p is not Ready"},
		{"only the agent", withAgent(status(), true), "reports no app container yet"},
		{"no status yet", status(), "reports no app container yet"},
	} {
		err := podReady(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: tc.status})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v; want healthy", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v; want an error saying %q", tc.name, err, tc.want)
		}
	}
}

// An agent gated on its pod's readiness (health signal "ready"), run as a
// user that may read its RedisLock but not list pods: /leader says why it
// does not campaign; once granted the redislock-agent-pod-reader rules it
// campaigns only while its app container is Ready, and steps down when it
// is not (status written as the kubelet would). It learns all of it from
// one watch: its requests on pods are a few lists and watches, not one a
// second.
func TestPodReadinessGatesTheAgent(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redisproc.Options{})
	admin, err := testenv.Client(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "agent-ready-"}}
	if err := admin.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	rl := &v1alpha1.RedisLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "lock"},
		Spec: v1alpha1.RedisLockSpec{Redis: &v1alpha1.RedisConnectionSpec{Addrs: []string{srv.Addr}}, TTL: &v1alpha1.Duration{Duration: 2 * time.Second}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "pod-a"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.test/app:1"}, {Name: agentflags.ContainerName, Image: "example.test/agent:1"}}}}
	for _, o := range []client.Object{rl, pod} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	setReady := func(app bool) {
		t.Helper()
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Ready: app}, {Name: agentflags.ContainerName, Ready: true}}
		if err := admin.Status().Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	setReady(false)

	userName := "agent-" + ns.Name
	user, err := testEnv.AddUser(envtest.User{Name: userName}, nil)
	if err != nil {
		t.Fatal(err)
	}
	grant(t, admin, ns.Name, userName, "lock-reader", []rbacv1.PolicyRule{{APIGroups: []string{"redislock.io"}, Resources: []string{"redislocks"}, Verbs: []string{"get"}}})
	cfg := user.Config()
	var podRequests atomic.Int64
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if strings.HasSuffix(r.URL.Path, "/pods") {
				podRequests.Add(1)
			}
			return rt.RoundTrip(r)
		})
	}
	const stepDownAfter = time.Second
	answers, _ := runAgent(t, cfg, Options{Lock: types.NamespacedName{Namespace: ns.Name, Name: "lock"}, Identity: "pod-a", ClusterID: "test-cluster",
		Health: healthprobe.Ready, StepDownAfter: stepDownAfter})
	says := func(part string) func(leaderhttp.Status) bool {
		return func(st leaderhttp.Status) bool { return !st.Leading && strings.Contains(st.Error, part) }
	}
	waitFor(t, 30*time.Second, "/leader to say the agent may not list pods", answers(says("forbidden")))

	// The rules of the ClusterRole the docs tell users to bind.
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "agent", "pod_reader.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var podReader rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(b, &podReader); err != nil {
		t.Fatal(err)
	}
	grant(t, admin, ns.Name, userName, "pod-reader", podReader.Rules)
	// The informer lists again after its backoff (up to 30s).
	waitFor(t, 60*time.Second, "/leader to say the app container is not Ready", answers(says("container app of pod pod-a is not Ready")))
	watching := podRequests.Load()

	setReady(true)
	// The fresh Redis's restart guard holds the lock back for its ttl.
	waitFor(t, 30*time.Second, "the agent to lead once its app is Ready", answers(func(st leaderhttp.Status) bool { return st.Leading }))
	notReady := time.Now()
	setReady(false)
	waitFor(t, 30*time.Second, "the agent to step down once its app is not Ready", answers(says("container app of pod pod-a is not Ready")))
	if took := time.Since(notReady); took < stepDownAfter {
		t.Errorf("the agent stepped down %v after its app turned not Ready; want no sooner than StepDownAfter (%v)", took, stepDownAfter)
	}
	if n := podRequests.Load() - watching; n > 1 {
		t.Errorf("the agent made %d requests on pods while its app turned Ready and back; want at most 1 (a new watch): one watch tells it all", n)
	}
}

// grant binds, in ns, a Role called name of rules to user.
func grant(t *testing.T, c client.Client, ns, user, name string, rules []rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	for _, o := range []client.Object{role, binding} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
}

// roundTripFunc is an http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
