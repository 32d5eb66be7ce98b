package cluster

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/redislock/redislock/internal/testing/testenv"
)

// leaderLabel is the label the agent keeps on its pod.
const leaderLabel = "redislock.io/leader"

func mustKubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, err := kubectl.Run(context.Background(), stdin, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return out
}

func mustHelm(t *testing.T, timeout time.Duration, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, helmBin, append([]string{"--kubeconfig", cluster.Kubeconfig}, args...)...)
	cmd.Dir = repoRoot
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// waitFor polls cond every 50ms until it returns true and returns how long
// that took; it fails t after within, with what and cond's last word.
func waitFor(t *testing.T, within time.Duration, what string, cond func(ctx context.Context) (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, within, true, func(ctx context.Context) (bool, error) {
		ok, why := cond(ctx)
		if ctx.Err() == nil { // a call cut short by the deadline says nothing
			last = why
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: not within %v: %s", what, within, last)
	}
	return time.Since(start)
}

func pods(ctx context.Context, ns, selector string) ([]corev1.Pod, error) {
	list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// leaders are the pods labelled leader, and their names as one string.
func leaders(ps []corev1.Pod) ([]corev1.Pod, string) {
	var ls []corev1.Pod
	var all []string
	for _, p := range ps {
		mark := p.Labels[leaderLabel]
		if p.DeletionTimestamp != nil {
			mark += "(terminating)"
		}
		if !slices.ContainsFunc(p.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == "redislock-agent" }) {
			mark += "(no agent)"
		}
		all = append(all, p.Name+"="+mark)
		if p.Labels[leaderLabel] == "true" {
			ls = append(ls, p)
		}
	}
	return ls, strings.Join(all, " ")
}

// ready counts the pods that are Ready and not terminating.
func ready(ps []corev1.Pod) int {
	n := 0
	for _, p := range ps {
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				n++
			}
		}
	}
	return n
}

// labelOverlapLimit bounds how long two pods may both carry the leader
// label. The README promises no more than "for a moment after a
// handover": the old leader's agent patches its label false after it has
// released the lock, so the new leader's patch can land first. A renew
// interval (2/15 of the 5s ttl) plus two patches is well below this.
const labelOverlapLimit = 2 * time.Second

// sampler lists the pods every 100ms (or as often as the API server
// answers, if slower) until stopped and records each stretch of samples in
// which more than one pod carries the leader label.
type sampler struct {
	start   time.Time
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	samples int
	errs    []string
	twice   []string      // every sample with two labels, for the failure message
	since   time.Time     // when the current stretch of two labels began; zero outside one
	longest time.Duration // the longest such stretch so far
	stretch int           // how many stretches
}

func startSampler(ns, selector string) *sampler {
	s := &sampler{start: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			ps, err := pods(ctx, ns, selector)
			cancel()
			now := time.Now()
			s.mu.Lock()
			switch ls, all := leaders(ps); {
			case err != nil:
				s.errs = append(s.errs, err.Error())
			case len(ls) > 1:
				if s.since.IsZero() {
					s.since = now
					s.stretch++
				}
				s.longest = max(s.longest, now.Sub(s.since))
				s.twice = append(s.twice, fmt.Sprintf("%s: %s", now.Format("15:04:05.000"), all))
			default:
				s.since = time.Time{}
			}
			s.samples++
			s.mu.Unlock()
		}
	}()
	return s
}

// check stops the sampler and fails t if two pods carried the leader label
// for longer than labelOverlapLimit, or if listing failed in more than a
// few samples.
func (s *sampler) check(t *testing.T) {
	t.Helper()
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	t.Logf("leader label sampled %d times in %.0fs: two pods labelled in %d samples, %d stretches, the longest %v",
		s.samples, time.Since(s.start).Seconds(), len(s.twice), s.stretch, s.longest.Round(time.Millisecond))
	if s.longest > labelOverlapLimit {
		t.Errorf("two pods carried %s=true for %v, more than %v:\n%s", leaderLabel, s.longest, labelOverlapLimit, strings.Join(s.twice, "\n"))
	}
	if len(s.errs) > s.samples/10 {
		t.Errorf("%d of %d samples failed to list pods: %s", len(s.errs), s.samples, s.errs[0])
	}
}

// steadyOneLeader samples the pods for d and fails t unless every sample
// finds exactly one leader, the same one: with nothing disturbed, the
// label holds still.
func steadyOneLeader(t *testing.T, ns, selector string, d time.Duration) {
	t.Helper()
	var first string
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		ps, err := pods(context.Background(), ns, selector)
		if err != nil {
			t.Fatal(err)
		}
		ls, all := leaders(ps)
		if len(ls) != 1 || (first != "" && ls[0].Name != first) {
			t.Fatalf("steady state, yet not the one same leader: %s (first %s)", all, first)
		}
		first = ls[0].Name
	}
}

// logAvailability logs, right after an install returned, how many of the
// controller Deployment ns/name's pods are Ready and how many Available
// (Ready for minReadySeconds): whether the install waited for the latter.
func logAvailability(t *testing.T, ns, name string) {
	t.Helper()
	d, err := client.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d Ready, %d Available of %d (minReadySeconds %d)", name, d.Status.ReadyReplicas, d.Status.AvailableReplicas, *d.Spec.Replicas, d.Spec.MinReadySeconds)
}

// webhookAnswersAtOnce checks, once and at once, that the API server
// reaches the injection webhook through its Service: right after the
// install returned (helm install --wait, whose hook waits for the webhook;
// kubectl rollout status after kubectl apply -k), with no wait, a dry-run pod
// naming a RedisLock that does not exist is refused, which only the webhook
// does (failing open, failurePolicy Ignore would let it through).
func webhookAnswersAtOnce(t *testing.T) {
	t.Helper()
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "webhook-probe", Annotations: map[string]string{"redislock.io/lock": "no-such-lock"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: cluster.AppImage}}},
	}
	_, err := client.CoreV1().Pods("default").Create(context.Background(), probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err == nil || !strings.Contains(err.Error(), `RedisLock "no-such-lock" not found`) {
		t.Fatalf("right after the install returned, the API server did not reach the webhook: a pod naming a missing RedisLock got %v, want the webhook's refusal", err)
	}
}

// hookWatch records the chart's webhook-wait hook pod while an install
// runs: Helm deletes the Job once it succeeded (and the pod goes with it),
// so its log and times are read while it is there.
type hookWatch struct {
	stop chan struct{}
	done chan struct{}
	pod  *corev1.Pod
	log  string
}

func watchHook(ns string) *hookWatch {
	h := &hookWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-h.stop:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			ps, err := pods(ctx, ns, "app.kubernetes.io/component=webhook-wait")
			if err == nil && len(ps) > 0 {
				p := ps[len(ps)-1]
				h.pod = &p
				if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
					if b, err := client.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx); err == nil {
						h.log = string(b)
					}
				}
			}
			cancel()
		}
	}()
	return h
}

// report stops the watch, fails t if no hook pod ran, and logs what it saw
// of the hook against the time the last controller pod (selected by
// controller) became Ready, which is when Helm's --wait was satisfied; the
// kubelet's times have second resolution.
func (h *hookWatch) report(t *testing.T, ns, controller string) {
	t.Helper()
	close(h.stop)
	<-h.done
	if h.pod == nil {
		// The dry-run probe and the Deployment right after catch a
		// missing wait only when they beat kube-proxy: this catches it
		// every time.
		t.Error("no webhook-wait hook pod ran during helm install: the install did not wait for the webhook to answer through its Service (webhook.waitJob disabled?)")
		return
	}
	var ready time.Time
	if ps, err := pods(context.Background(), ns, controller); err == nil {
		for _, p := range ps {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && c.LastTransitionTime.After(ready) {
					ready = c.LastTransitionTime.Time
				}
			}
		}
	}
	since := func(at time.Time) string { return fmt.Sprintf("%+.0fs", at.Sub(ready).Seconds()) }
	line := fmt.Sprintf("webhook-wait hook pod %s %s: created %s after the last controller pod was Ready", h.pod.Name, h.pod.Status.Phase, since(h.pod.CreationTimestamp.Time))
	for _, s := range h.pod.Status.ContainerStatuses {
		if s.State.Terminated != nil {
			line += fmt.Sprintf(", ran from %s to %s, exit %d", since(s.State.Terminated.StartedAt.Time), since(s.State.Terminated.FinishedAt.Time), s.State.Terminated.ExitCode)
		}
	}
	t.Logf("%s; its log:\n%s", line, h.log)
}

// docCommand fails t unless the block marked id=<id> in doc holds the
// one command want, which the test then runs as the doc says.
func docCommand(t *testing.T, doc, id string, want []string) {
	t.Helper()
	block, err := testenv.DocBlockByID(repoRoot, doc, id)
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := testenv.Commands(block.Text)
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) != 1 || !slices.Equal(cmds[0], want) {
		t.Fatalf("%s:%d gives %q; this test runs %q", doc, block.Line, cmds, want)
	}
}
