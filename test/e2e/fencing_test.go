package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
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

	"github.com/redislock/redislock/internal/leaderhttp"
	"github.com/redislock/redislock/internal/testing/benchresult"
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
	mustKubectl(t, "create", "role", "-n", ns, "writer", "--verb=create,delete", "--resource=configmaps")
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
// holder's key expiring, as a leader paused past its ttl lets it, both
// pods write back to back from the new holder's grant on: the new
// holder's writes are admitted once the RedisLock's status shows it, and
// the deposed holder's are refused from then on, deletes as creates. It
// logs the lags, from
// the new holder's grant, of both, and the writes each made meanwhile
// (with $FENCING_JSON set, it writes them there).
func TestFencingPolicyAdmitsOnlyTheHolder(t *testing.T) {
	f := startFenced(t)
	ns, s, writers, write := f.ns, f.s, f.writers, f.write
	ctx := context.Background()
	pods := []string{"op-a", "op-b"}
	name := lockIn(t, ns) + "/operator"
	out := benchresult.Fencing{Timing: faultTiming.timing()}
	// Deletes are fenced as writes are: a server dry-run delete of target.
	target := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "target"}}
	admin, err := testenv.Client(apiServer(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.Create(ctx, target); err != nil {
		t.Fatal(err)
	}
	del := func(pod string) error { return writers[pod].Delete(ctx, target.DeepCopy(), client.DryRunAll) }
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
		// Back to back, each pod until its verdict turns: bounded by
		// the deadline, and by the controller's status write (tens of
		// milliseconds).
		var admitted, refused time.Duration
		deadline := granted.Add(20 * time.Second)
		for admitted == 0 || refused == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: 20s after the grant, %s admitted after %v and %s refused after %v (0: not yet)", round, holder, admitted, deposed, refused)
			}
			if admitted == 0 {
				out.HolderWrites++
				if write(writers[holder]) == nil {
					admitted = time.Since(granted)
				} else {
					out.HolderRefused++
				}
			}
			if refused == 0 {
				out.DeposedWrites++
				if write(writers[deposed]) != nil {
					refused = time.Since(granted)
				} else {
					out.DeposedAdmitted++
				}
			}
		}
		// From the new holder's first admitted write on, the deposed
		// holder is refused: both read the same cache.
		if err := write(writers[deposed]); err == nil {
			t.Fatalf("round %d: %s's write admitted after %s's", round, deposed, holder)
		} else if round > 0 && !strings.Contains(err.Error(), "is held by "+holder) {
			t.Errorf("round %d: %s refused with %v; want the policy naming %s", round, deposed, err, holder)
		}
		if err := del(deposed); err == nil {
			t.Fatalf("round %d: %s's delete admitted after %s's write", round, deposed, holder)
		}
		if err := del(holder); err != nil {
			t.Fatalf("round %d: %s's delete: %v; want it admitted", round, holder, err)
		}
		out.Handovers++
		out.AdmitSeconds = append(out.AdmitSeconds, admitted.Seconds())
		out.RefuseSeconds = append(out.RefuseSeconds, refused.Seconds())
	}
	t.Logf("over %d handovers, from the new holder's grant: its writes admitted after p50 %v, max %v (%d of its %d writes refused before); the deposed holder's refused after p50 %v, max %v (%d of its %d writes admitted before)",
		out.Handovers, p50Max(out.AdmitSeconds)[0], p50Max(out.AdmitSeconds)[1], out.HolderRefused, out.HolderWrites,
		p50Max(out.RefuseSeconds)[0], p50Max(out.RefuseSeconds)[1], out.DeposedAdmitted, out.DeposedWrites)
	recordFencing(t, func(f *benchresult.Fencing) {
		f.Timing, f.Handovers, f.AdmitSeconds, f.RefuseSeconds = out.Timing, out.Handovers, out.AdmitSeconds, out.RefuseSeconds
		f.DeposedWrites, f.DeposedAdmitted, f.HolderWrites, f.HolderRefused = out.DeposedWrites, out.DeposedAdmitted, out.HolderWrites, out.HolderRefused
	})
}

// p50Max returns the median and the maximum of seconds, as durations.
func p50Max(seconds []float64) [2]time.Duration {
	s := slices.Sorted(slices.Values(seconds))
	d := func(v float64) time.Duration { return time.Duration(v * float64(time.Second)).Round(time.Millisecond) }
	return [2]time.Duration{d(s[len(s)/2]), d(s[len(s)-1])}
}

// recordFencing, with $FENCING_JSON set, reads the fencing results there
// (none if the file does not exist), lets change add its own, and writes
// them back: the fencing tests run one after another and share the file.
func recordFencing(t *testing.T, change func(*benchresult.Fencing)) {
	t.Helper()
	path := os.Getenv("FENCING_JSON")
	if path == "" {
		return
	}
	var f benchresult.Fencing
	switch b, err := os.ReadFile(path); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		t.Fatal(err)
	default:
		if err := json.Unmarshal(b, &f); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	change(&f)
	writeJSON(t, path, f)
}

// recordCandidate adds, with $FENCING_JSON set, the waits of a kind of
// candidate that leads once admitted.
func recordCandidate(t *testing.T, c benchresult.FencingCandidate) {
	t.Helper()
	recordFencing(t, func(f *benchresult.Fencing) {
		f.Candidates = slices.DeleteFunc(f.Candidates, func(o benchresult.FencingCandidate) bool { return o.Method == c.Method })
		f.Candidates = append(f.Candidates, c)
	})
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
	c := benchresult.FencingCandidate{Method: "plugin", Handover: "the old leader's release, then the new one's Create"}
	for round := range 8 {
		holder := pods[round%2]
		lock := elections[holder].Lock
		start := time.Now()
		// The fresh Redis's restart guard holds the lock back for a ttl.
		waitUntil(t, 10*time.Second, holder+" acquiring", func() bool {
			return lock.Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: holder}) == nil
		})
		if round > 0 { // the first waited for the restart guard too
			c.WaitSeconds = append(c.WaitSeconds, time.Since(start).Seconds())
		}
		if err := f.write(f.writers[holder]); err != nil {
			t.Fatalf("round %d: %s's first write after Create: %v; want it admitted", round, holder, err)
		}
		if err := lock.Update(ctx, resourcelock.LeaderElectionRecord{}); err != nil { // release
			t.Fatal(err)
		}
	}
	w := p50Max(c.WaitSeconds)
	t.Logf("Create, with its wait for the API server, over %d handovers after the first: p50 %v, max %v", len(c.WaitSeconds), w[0], w[1])
	recordCandidate(t, c)
}

// TestAgentWithFencingLeadsOnceAdmitted: the agents of op-a and op-b,
// run with -fencing (as the annotation redislock.io/fencing: "true" makes
// the webhook run them), report leading only once the API server shows
// their pod as the holder: the test long-polls the standby's /leader
// and writes with its pod's token the instant it says it leads, and the
// write is admitted, through 6 handovers, each by SIGTERM (the leader
// releases). The deposed pod's writes are refused by then.
func TestAgentWithFencingLeadsOnceAdmitted(t *testing.T) {
	f := startFenced(t)
	fl := &agentFleet{t: t, bin: goBuild(t, "."), ns: f.ns, lock: "operator", kubeconfig: agentUser(t, f.ns), clusterID: clusterIDOf(t, apiServer(t)),
		dir: t.TempDir(), procs: map[string]*agentProc{}, perAgent: func(string) []string { return []string{"-fencing"} }}
	pods := []string{"op-a", "op-b"}
	addrs := map[string]string{}
	for _, pod := range pods {
		addrs[pod] = freeAddr(t)
	}
	fl.start(pods[0], addrs[pods[0]])
	// The fresh Redis's restart guard holds the lock back for a ttl.
	awaitAgentLeading(t, addrs[pods[0]], 3*faultTiming.lease+10*time.Second)
	c := benchresult.FencingCandidate{Method: "agent", Handover: "SIGTERM to the leader's agent"}
	for round := range 6 {
		leader, next := pods[round%2], pods[(round+1)%2]
		if err := f.write(f.writers[leader]); err != nil {
			t.Fatalf("round %d: %s's write while it leads: %v", round, leader, err)
		}
		fl.start(next, addrs[next])
		waitUntil(t, 20*time.Second, next+" to see "+leader+" lead", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			st, _, err := leaderhttp.Get(ctx, "http://"+addrs[next]+"/leader")
			return err == nil && st.Holder == leader
		})
		termed := time.Now()
		fl.signal(leader, syscall.SIGTERM)
		awaitAgentLeading(t, addrs[next], 20*time.Second)
		c.WaitSeconds = append(c.WaitSeconds, time.Since(termed).Seconds())
		if err := f.write(f.writers[next]); err != nil {
			t.Fatalf("round %d: %s's first write once its /leader says it leads: %v; want it admitted", round, next, err)
		}
		if err := f.write(f.writers[leader]); err == nil {
			t.Fatalf("round %d: the deposed %s's write admitted after %s's", round, leader, next)
		}
		if err := fl.waitExit(leader, 10*time.Second); err != nil {
			t.Fatalf("round %d: %s after SIGTERM: %v", round, leader, err)
		}
	}
	w := p50Max(c.WaitSeconds)
	t.Logf("from the leader's SIGTERM to the next agent's /leader saying it leads (admitted), over %d handovers: p50 %v, max %v", len(c.WaitSeconds), w[0], w[1])
	recordCandidate(t, c)
}

// awaitAgentLeading long-polls the /leader of the agent at addr until it
// says it leads, and returns at once then.
func awaitAgentLeading(t *testing.T, addr string, within time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	after := ""
	for {
		url := "http://" + addr + "/leader?wait=10s"
		if after != "" {
			url += "&after=" + after
		}
		st, _, err := leaderhttp.Get(ctx, url)
		switch {
		case err == nil && st.Leading:
			return
		case err == nil:
			after = st.ObservedAt.Format(time.RFC3339Nano)
		case ctx.Err() != nil:
			t.Fatalf("the agent at %s did not lead within %v: %v", addr, within, err)
		default:
			after = ""
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond): // not listening yet
			}
		}
	}
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
