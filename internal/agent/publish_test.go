package agent

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/redislock/redislock/internal/testing/testenv"
)

// logged is one error the agent logged.
type logged struct {
	Msg   string `json:"msg"`
	Error string `json:"error"`
}

// labelingAgent returns an agent that labels the pod "pod-a" in ns,
// connecting with cfg, and the errors it logs. It has not campaigned, so
// it labels the pod "false".
func labelingAgent(t *testing.T, cfg *rest.Config, ns string) (*Agent, *[]logged) {
	t.Helper()
	var errs []logged // passes run on the test's goroutine
	log := funcr.NewJSON(func(obj string) {
		var e logged
		if err := json.Unmarshal([]byte(obj), &e); err != nil {
			t.Errorf("log line %s: %v", obj, err)
		}
		errs = append(errs, e)
	}, funcr.Options{})
	a, err := New(cfg, Options{Lock: types.NamespacedName{Namespace: ns, Name: "lock"}, Identity: "pod-a", LabelPod: true, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	return a, &errs
}

// checkLogged fails unless the agent logged exactly one error since the
// last check (*errs), whose message is msg and whose error says cause.
func checkLogged(t *testing.T, errs *[]logged, msg, cause string) {
	t.Helper()
	if len(*errs) != 1 || (*errs)[0].Msg != msg || !strings.Contains((*errs)[0].Error, cause) {
		t.Errorf("logged %+v, want one error %q saying %q", *errs, msg, cause)
	}
	*errs = nil
}

// A failed label write is logged once per cause, not at every pass, and
// the hint about the role comes only with the API server's refusal: a
// missing pod is logged as it is, and a pass cut short by the agent's stop
// not at all. A write that succeeds lets the next failure be logged again.
func TestLabelFailuresAreLoggedOncePerCause(t *testing.T) {
	ctx := context.Background()
	admin, err := testenv.Client(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "agent-"}}
	if err := admin.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	const hint = "cannot label the pod; it needs patch on pods (the redislock-agent role)"

	t.Run("forbidden", func(t *testing.T) {
		user, err := testEnv.AddUser(envtest.User{Name: "no-rbac"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		a, errs := labelingAgent(t, user.Config(), ns.Name)
		var label labelState
		for range 3 {
			a.pass(ctx, &label)
		}
		checkLogged(t, errs, hint, "forbidden")
	})

	t.Run("other causes", func(t *testing.T) {
		a, errs := labelingAgent(t, restConfig, ns.Name)
		var label labelState
		// A pass that a stop cuts short logs nothing: the last pass,
		// on a context of its own, writes the label.
		stopped, cancel := context.WithCancel(ctx)
		cancel()
		a.pass(stopped, &label)
		if len(*errs) != 0 {
			t.Errorf("a pass cut short by the stop logged %+v; want nothing", *errs)
		}
		for range 3 {
			a.pass(ctx, &label)
		}
		checkLogged(t, errs, "cannot label the pod", `pods "pod-a" not found`)

		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "pod-a"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.test/app:1"}}},
		}
		if err := admin.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		a.pass(ctx, &label)
		if len(*errs) != 0 {
			t.Errorf("labeling an existing pod logged %+v", *errs)
		}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			t.Fatal(err)
		}
		if got := pod.Labels[LeaderLabel]; got != "false" {
			t.Errorf("label %s=%q, want false", LeaderLabel, got)
		}

		// The same cause as before the success is logged again.
		if err := admin.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
		label.written = "true" // as if the pod had led since
		a.pass(ctx, &label)
		checkLogged(t, errs, "cannot label the pod", `pods "pod-a" not found`)
	})
}
