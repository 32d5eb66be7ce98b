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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/internal/testing/testenv"
	"github.com/redislock/redislock/pkg/mgrelection"
	"github.com/redislock/redislock/pkg/redislock"
)

// fenced is a namespace whose ConfigMap writes the fencing policy guards,
// with the RedisLock operator as its param: the pods op-a and op-b of the
// fenced service account operator, each with a client from a token bound
// to it.
type fenced struct {
	ns      string
	s       *redisproc.Server
	writers map[string]client.Client
	seq     int
}

// startFenced applies config/policy/fencing.yaml and docs/operators.md's
// binding (for namespace ops, made the test's), and waits until the
// policy refuses a pod while nobody holds the lock.
func startFenced(t *testing.T) *fenced {
	t.Helper()
	f := &fenced{s: redistest.Start(t, redisproc.Options{Password: "fence-pass"}), writers: map[string]client.Client{}}
	startController(t, nil)
	f.ns = newNamespace(t)
	ns := f.ns
	applyRedisLock(t, ns, "operator", f.s, "fence-pass", faultTiming)
	mustKubectl(t, "annotate", "-n", ns, "redislock", "operator", "redislock.io/fence-service-accounts=operator")
	mustKubectl(t, "create", "serviceaccount", "-n", ns, "operator")
	mustKubectl(t, "create", "role", "-n", ns, "writer", "--verb=create", "--resource=configmaps")
	mustKubectl(t, "create", "rolebinding", "-n", ns, "writer", "--role=writer", "--serviceaccount="+ns+":operator")

	policy := filepath.Join(repoRoot, "config", "policy", "fencing.yaml")
	mustKubectl(t, "apply", "-f", policy)
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
	for _, pod := range []string{"op-a", "op-b"} {
		mustKubectl(t, "run", "-n", ns, pod, "--image=example.test/operator:1", "--restart=Never", `--overrides={"spec":{"serviceAccountName":"operator"}}`)
		f.writers[pod] = podClient(t, ns, "operator", pod)
	}
	admin, err := testenv.Client(apiServer(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.write(admin); err != nil {
		t.Fatalf("a user's write: %v; the policy applies to fenced pods only", err)
	}
	waitUntil(t, 30*time.Second, "the policy to refuse a pod while nobody holds the lock", func() bool {
		err := f.write(f.writers["op-a"])
		return err != nil && strings.Contains(err.Error(), "RedisLock "+ns+"/operator has no holder (policy redislock-fencing)")
	})
	return f
}

// write is a dry-run create of a ConfigMap with c.
func (f *fenced) write(c client.Client) error {
	f.seq++
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: fmt.Sprintf("w-%d", f.seq)}}
	return c.Create(context.Background(), cm, client.DryRunAll)
}

// TestFencingPolicyAdmitsOnlyTheHolder: on the real API server, the
// policy bound to the ConfigMaps of a namespace with a RedisLock as its
// param, and two pods of the fenced service account with tokens bound to
// them (raw clients: no write gate). Through 8 handovers, each by the
// holder's key expiring, as a leader paused past its ttl lets it: the new
// holder's writes are admitted once the RedisLock's status shows it, and
// the deposed holder's are refused from then on. It logs the lags, from
// the new holder's grant, of both.
func TestFencingPolicyAdmitsOnlyTheHolder(t *testing.T) {
	f := startFenced(t)
	ns, s, writers, write := f.ns, f.s, f.writers, f.write
	ctx := context.Background()
	pods := []string{"op-a", "op-b"}
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

// TestPluginWithFencingLeadsOnceAdmitted: a candidate of
// mgrelection.WithFencing, acquiring through its election Lock, returns
// from Create only once the API server shows it as the holder, so its
// first write, right after, is admitted. 8 handovers, by release.
func TestPluginWithFencingLeadsOnceAdmitted(t *testing.T) {
	f := startFenced(t)
	ctx := context.Background()
	pods := []string{"op-a", "op-b"}
	elections := map[string]*mgrelection.Election{}
	for _, pod := range pods {
		e, err := mgrelection.ForRedisLock(ctx, apiServer(t), types.NamespacedName{Namespace: f.ns, Name: "operator"}, pod, mgrelection.WithFencing())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.Close)
		elections[pod] = e
	}
	var waits []time.Duration
	for round := range 8 {
		holder := pods[round%2]
		lock := elections[holder].Lock
		start := time.Now()
		// The fresh Redis's restart guard holds the lock back for a ttl.
		waitUntil(t, 10*time.Second, holder+" acquiring", func() bool {
			return lock.Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: holder}) == nil
		})
		if round > 0 { // the first waited for the restart guard too
			waits = append(waits, time.Since(start))
		}
		if err := f.write(f.writers[holder]); err != nil {
			t.Fatalf("round %d: %s's first write after Create: %v; want it admitted", round, holder, err)
		}
		if err := lock.Update(ctx, resourcelock.LeaderElectionRecord{}); err != nil { // release
			t.Fatal(err)
		}
	}
	slices.Sort(waits)
	t.Logf("Create, with its wait for the API server, over %d handovers after the first: p50 %v, max %v", len(waits), waits[len(waits)/2], waits[len(waits)-1])
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
