package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/internal/testing/testenv"
	"github.com/redislock/redislock/pkg/redislock"
)

// TestFencingPolicyAdmitsOnlyTheHolder applies config/policy/fencing.yaml
// on the real API server, bound to the ConfigMaps of a namespace with a
// RedisLock as its param, and gives two pods of the fenced service account
// tokens bound to them (raw clients: no write gate). Through 8 handovers,
// each by the holder's key expiring, as a leader paused past its ttl
// lets it: the new holder's writes are admitted once the RedisLock's status
// shows it, and the deposed holder's are refused from then on. It logs
// the lags, from the new holder's grant, of both.
func TestFencingPolicyAdmitsOnlyTheHolder(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{Password: "fence-pass"})
	startController(t, nil)
	ns := newNamespace(t)
	applyRedisLock(t, ns, "operator", s, "fence-pass", faultTiming)
	mustKubectl(t, "annotate", "-n", ns, "redislock", "operator", "redislock.io/fence-service-accounts=operator")
	mustKubectl(t, "create", "serviceaccount", "-n", ns, "operator")
	mustKubectl(t, "create", "role", "-n", ns, "writer", "--verb=create", "--resource=configmaps")
	mustKubectl(t, "create", "rolebinding", "-n", ns, "writer", "--role=writer", "--serviceaccount="+ns+":operator")

	policy := filepath.Join(repoRoot, "config", "policy", "fencing.yaml")
	mustKubectl(t, "apply", "-f", policy)
	// docs/operators.md's binding, for namespace ops, made ns's.
	block, err := testenv.DocBlockByID(repoRoot, "docs/operators.md", "fencing-binding")
	if err != nil {
		t.Fatal(err)
	}
	binding := filepath.Join(t.TempDir(), "binding.yaml")
	if err := os.WriteFile(binding, []byte(strings.ReplaceAll(block.Text, "ops", ns)), 0o600); err != nil {
		t.Fatal(err)
	}
	mustKubectl(t, "apply", "-f", binding)
	t.Cleanup(func() {
		_, _ = kubectl(t, "delete", "-f", binding)
		_, _ = kubectl(t, "delete", "-f", policy)
	})

	var admin client.Client
	pods := []string{"op-a", "op-b"}
	writers := map[string]client.Client{}
	for _, pod := range pods {
		mustKubectl(t, "run", "-n", ns, pod, "--image=example.test/operator:1", "--restart=Never", `--overrides={"spec":{"serviceAccountName":"operator"}}`)
		writers[pod] = podClient(t, ns, "operator", pod)
	}
	admin, err = testenv.Client(apiServer(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	seq := 0
	write := func(c client.Client) error {
		seq++
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("w-%d", seq)}}
		return c.Create(ctx, cm, client.DryRunAll)
	}
	if err := write(admin); err != nil {
		t.Fatalf("a user's write: %v; the policy applies to fenced pods only", err)
	}
	waitUntil(t, 30*time.Second, "the policy to refuse a pod while nobody holds the lock", func() bool {
		err := write(writers["op-a"])
		return err != nil && strings.Contains(err.Error(), "RedisLock "+ns+"/operator has no holder (policy redislock-fencing)")
	})

	name := lockIn(t, ns) + "/operator"
	var admitLags, refuseLags []time.Duration
	for round := range 8 {
		holder, deposed := pods[round%2], pods[(round+1)%2]
		lc, err := redislock.New(redistest.Clients(t, s), &redislock.Options{AssumeDurable: true, Identity: holder})
		if err != nil {
			t.Fatal(err)
		}
		// The last holder's key expires (ttl 2s, no renewal): the
		// deposed holder is a leader paused past its ttl.
		waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err = lc.ObtainWait(waitCtx, name, faultTiming.lease, nil)
		cancel()
		if err != nil {
			t.Fatalf("round %d: %s: %v", round, holder, err)
		}
		granted := time.Now()
		var admitted, refused time.Duration
		waitUntil(t, 20*time.Second, holder+" admitted and "+deposed+" refused", func() bool {
			if admitted == 0 && write(writers[holder]) == nil {
				admitted = time.Since(granted)
			}
			if refused == 0 && write(writers[deposed]) != nil {
				refused = time.Since(granted)
			}
			return admitted != 0 && refused != 0
		})
		// From the new holder's first admitted write on, the deposed
		// holder is refused: both read the same cache.
		if err := write(writers[deposed]); err == nil {
			t.Fatalf("round %d: %s's write admitted after %s's", round, deposed, holder)
		} else if round > 0 && !strings.Contains(err.Error(), "is held by "+holder) {
			t.Errorf("round %d: %s refused with %v; want the policy naming %s", round, deposed, err, holder)
		}
		admitLags, refuseLags = append(admitLags, admitted), append(refuseLags, refused)
	}
	slices.Sort(admitLags)
	slices.Sort(refuseLags)
	t.Logf("over %d handovers, from the new holder's grant: its writes admitted after p50 %v, max %v; the deposed holder's refused after p50 %v, max %v",
		len(admitLags), admitLags[len(admitLags)/2], admitLags[len(admitLags)-1], refuseLags[len(refuseLags)/2], refuseLags[len(refuseLags)-1])
}

// podClient is a client with a token of service account sa bound to pod
// ns/pod: the API server's view of its requests carries the pod's name,
// as a process in that pod sees it.
func podClient(t *testing.T, ns, sa, pod string) client.Client {
	t.Helper()
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(apiServer(t))
	if err != nil {
		t.Fatal(err)
	}
	p, err := cs.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod, UID: p.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(apiServer(t))
	cfg.BearerToken = tr.Status.Token
	c, err := testenv.Client(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
