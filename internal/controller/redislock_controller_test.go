package controller_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/internal/controller"
	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/pkg/redisconn"
	"github.com/redislock/redislock/pkg/redislock"
)

var nsCount atomic.Int32

// namespace creates a fresh namespace for one test.
func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("t%d-%d", nsCount.Add(1), time.Now().UnixNano()%100000)}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	// envtest runs no namespace controller: a deleted namespace keeps its
	// objects. Delete the RedisLocks, so that the one manager of the
	// package stops looking at them: with -count=3, the locks of earlier
	// runs on stopped servers (a thousand of them from the flood test)
	// took the workers from the next tests' locks.
	t.Cleanup(func() {
		if err := k8s.DeleteAllOf(context.Background(), &v1alpha1.RedisLock{}, client.InNamespace(ns.Name)); err != nil {
			t.Errorf("delete the RedisLocks of namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}

// redisLock returns a RedisLock on addrs with a short ttl.
func redisLock(ns, name string, mode v1alpha1.RedisMode, addrs ...string) *v1alpha1.RedisLock {
	return &v1alpha1.RedisLock{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.RedisLockSpec{
			Redis:         &v1alpha1.RedisConnectionSpec{Mode: mode, Addrs: addrs},
			TTL:           &v1alpha1.Duration{Duration: 2 * time.Second},
			RenewInterval: &v1alpha1.Duration{Duration: 200 * time.Millisecond},
			RenewDeadline: &v1alpha1.Duration{Duration: 1200 * time.Millisecond},
		},
	}
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := k8s.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}

// waitLock polls the RedisLock through the live client until cond holds.
func waitLock(t *testing.T, rl *v1alpha1.RedisLock, timeout time.Duration, what string, cond func(*v1alpha1.RedisLock) bool) *v1alpha1.RedisLock {
	t.Helper()
	var got *v1alpha1.RedisLock
	waitFor(t, timeout, what, func() (bool, any) {
		got = &v1alpha1.RedisLock{}
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(rl), got)
		if err != nil {
			return false, err
		}
		return cond(got), fmt.Sprintf("annotations %v, finalizers %v, status %+v", got.Annotations, got.Finalizers, got.Status)
	})
	return got
}

func condition(rl *v1alpha1.RedisLock, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(rl.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

func isCond(typ string, status metav1.ConditionStatus, reason string) func(*v1alpha1.RedisLock) bool {
	return func(rl *v1alpha1.RedisLock) bool {
		c := condition(rl, typ)
		return c.Status == status && c.Reason == reason
	}
}

// holder returns a lock client for the RedisLock's lock, named identity.
func holder(t *testing.T, identity string, servers ...*redisproc.Server) *redislock.Client {
	t.Helper()
	c, err := redislock.New(redistest.Clients(t, servers...), &redislock.Options{AssumeDurable: true, Identity: identity})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCreateFillsDefaults(t *testing.T) {
	ns := namespace(t)
	rl := &v1alpha1.RedisLock{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "minimal"},
		Spec:       v1alpha1.RedisLockSpec{Redis: &v1alpha1.RedisConnectionSpec{Addrs: []string{"redis:6379"}}},
	}
	create(t, rl)
	var got v1alpha1.RedisLock
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(rl), &got); err != nil {
		t.Fatal(err)
	}
	s := got.Spec
	// renewInterval and renewDeadline stay unset: the engine derives them
	// from the ttl, and the status shows the values in effect.
	if s.Redis.Mode != v1alpha1.ModeStandalone || s.TTL == nil || s.TTL.Duration != 15*time.Second || s.RenewInterval != nil ||
		s.RenewDeadline != nil || s.DeletionPolicy != v1alpha1.DeletionRetain ||
		s.Redis.NodeTimeout == nil || s.Redis.NodeTimeout.Duration != 200*time.Millisecond || s.Redis.DB == nil || *s.Redis.DB != 0 {
		t.Fatalf("defaults not filled in: %+v", s)
	}
	got2 := waitLock(t, rl, 3*resync, "the effective timing in the status", func(got *v1alpha1.RedisLock) bool { return got.Status.EffectiveTiming != nil })
	if et := got2.Status.EffectiveTiming; et.TTL.Duration != 15*time.Second || et.RenewInterval.Duration != 2*time.Second || et.RenewDeadline.Duration != 10*time.Second {
		t.Fatalf("effective timing %+v; want 15s, 2s and 10s", et)
	}
}

func TestInvalidSpecsAreRejectedNamingTheField(t *testing.T) {
	ns := namespace(t)
	cases := []struct {
		name string
		edit func(*v1alpha1.RedisLock)
		want string
	}{
		{"even redlock", func(rl *v1alpha1.RedisLock) {
			rl.Spec.Redis.Mode, rl.Spec.Redis.Addrs = v1alpha1.ModeRedlock, []string{"a:1", "b:1"}
		}, "Redlock mode needs an odd number of addrs"},
		{"two standalone addrs", func(rl *v1alpha1.RedisLock) { rl.Spec.Redis.Addrs = []string{"a:1", "b:1"} }, "exactly one address"},
		{"deadline not below ttl", func(rl *v1alpha1.RedisLock) { rl.Spec.RenewDeadline.Duration = 2 * time.Second }, "spec.renewDeadline: Invalid value"},
		{"interval not below deadline", func(rl *v1alpha1.RedisLock) { rl.Spec.RenewInterval.Duration = 1500 * time.Millisecond }, "spec.renewInterval: Invalid value"},
		{"address without port", func(rl *v1alpha1.RedisLock) { rl.Spec.Redis.Addrs = []string{"redis"} }, "spec.redis.addrs[0]"},
		{"brace in lock name", func(rl *v1alpha1.RedisLock) { rl.Spec.LockName = "a{b}" }, "spec.lockName"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rl := redisLock(ns, fmt.Sprintf("bad-%d", i), v1alpha1.ModeStandalone, "redis:6379")
			tc.edit(rl)
			err := k8s.Create(context.Background(), rl)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v; want Invalid saying %q", err, tc.want)
			}
		})
	}
}

func TestStatusFollowsHolderQuicklyAndOnlyOnChange(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	ns := namespace(t)
	rl := redisLock(ns, "leader", v1alpha1.ModeStandalone, s.Addr)
	create(t, rl)
	waitLock(t, rl, 10*time.Second, "Ready and free", func(got *v1alpha1.RedisLock) bool {
		return isCond(v1alpha1.ConditionReady, metav1.ConditionTrue, controller.ReasonReady)(got) &&
			isCond(v1alpha1.ConditionHeld, metav1.ConditionFalse, controller.ReasonFree)(got)
	})
	name := lockIn(ns) + "/leader"
	ctx := context.Background()
	var lags []time.Duration
	for i := 0; i < 20; i++ {
		who := fmt.Sprintf("pod-%d", i)
		l, err := holder(t, who, s).Obtain(ctx, name, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		got := waitLock(t, rl, 5*time.Second, "holder "+who, func(got *v1alpha1.RedisLock) bool { return got.Status.HolderIdentity == who })
		lags = append(lags, time.Since(start))
		if got.Status.FencingToken != l.Fence() || got.Status.LeaderTransitions != int32(i) || got.Status.AcquireTime == nil {
			t.Fatalf("status after holder %d: %+v; want fence %d, %d transitions, an acquire time", i, got.Status, l.Fence(), i)
		}
		if i == 19 {
			// Renewals are invisible: they must not write status.
			rv := got.ResourceVersion
			looks := len(requests.reconciles(client.ObjectKeyFromObject(rl)))
			held, stop, err := l.Watchdog(ctx, 100*time.Millisecond, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			waitReconciles(t, rl, looks, 2, 3*resync)
			if err := stop(); err != nil || held.Err() == nil {
				t.Fatalf("watchdog: %v", err)
			}
			var now v1alpha1.RedisLock
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(rl), &now); err != nil {
				t.Fatal(err)
			}
			if now.ResourceVersion != rv {
				t.Fatalf("status written while only renewals happened: %+v", now.Status)
			}
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		waitLock(t, rl, 5*time.Second, "free after release", func(got *v1alpha1.RedisLock) bool { return got.Status.HolderIdentity == "" })
	}
	// Each holder change is one status apply, and nothing else.
	for _, w := range writesOf(t, rl) {
		if !slices.Equal(w, []string{reqStatusApply}) {
			t.Fatalf("a reconcile wrote %q; want only the status applied", w)
		}
	}
	slices.Sort(lags)
	p99 := lags[len(lags)*99/100]
	t.Logf("holder change to status: median %v, p99 %v over %d changes", lags[len(lags)/2], p99, len(lags))
	if p99 > time.Second {
		t.Fatalf("p99 lag %v; want within 1s, which only the pub/sub path gives (resync is %v)", p99, resync)
	}
}

func TestCrashedHolderClearsAtExpiry(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	ns := namespace(t)
	rl := redisLock(ns, "crash", v1alpha1.ModeStandalone, s.Addr)
	create(t, rl)
	// A holder that never renews nor releases: a crash.
	if _, err := holder(t, "crasher", s).Obtain(context.Background(), lockIn(ns)+"/crash", 1500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	waitLock(t, rl, 5*time.Second, "the holder", func(got *v1alpha1.RedisLock) bool { return got.Status.HolderIdentity == "crasher" })
	if got := holderSeries(t, ns, "crash"); len(got) != 1 || got[0] != "crasher" {
		t.Fatalf("redislock_holder_info holders %v, want [crasher]", got)
	}
	// No message announces an expiry; the controller looks again when the
	// key is due to expire, well before its resync.
	waitLock(t, rl, resync, "free after expiry", func(got *v1alpha1.RedisLock) bool { return got.Status.HolderIdentity == "" })
	if got := holderSeries(t, ns, "crash"); len(got) != 0 {
		t.Fatalf("redislock_holder_info holders %v for a free lock, want none", got)
	}
}

// holderSeries returns the holder label of each redislock_holder_info
// series of one RedisLock, from controller-runtime's registry.
func holderSeries(t *testing.T, ns, name string) []string {
	t.Helper()
	var holders []string
	for _, m := range metricSeries(t, "redislock_holder_info") {
		if m.labels["namespace"] == ns && m.labels["name"] == name && m.value == 1 {
			holders = append(holders, m.labels["holder"])
		}
	}
	return holders
}

// series is one series of a metric: its labels and value.
type series struct {
	labels map[string]string
	value  float64
}

// metricSeries returns every series of the gauge or counter name in
// controller-runtime's registry.
func metricSeries(t *testing.T, name string) []series {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []series
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			s := series{labels: map[string]string{}, value: m.GetGauge().GetValue() + m.GetCounter().GetValue()}
			for _, l := range m.GetLabel() {
				s.labels[l.GetName()] = l.GetValue()
			}
			out = append(out, s)
		}
	}
	return out
}

// A handover the controller sees with the lock free between the two
// holders (a graceful release, then the next grant) is a transition, in
// the metric as in status.leaderTransitions; the first holder is none.
func TestTransitionsCountAHandoverThroughAFreeLock(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	ns := namespace(t)
	rl := redisLock(ns, "handover", v1alpha1.ModeStandalone, s.Addr)
	create(t, rl)
	ctx := context.Background()
	name := lockIn(ns) + "/handover"
	transitions := func() float64 {
		for _, m := range metricSeries(t, "redislock_observed_transitions_total") {
			if m.labels["namespace"] == ns && m.labels["name"] == "handover" {
				return m.value
			}
		}
		return 0
	}
	a, err := holder(t, "pod-a", s).Obtain(ctx, name, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	waitLock(t, rl, 10*time.Second, "held by pod-a", func(got *v1alpha1.RedisLock) bool { return got.Status.HolderIdentity == "pod-a" })
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	waitLock(t, rl, 10*time.Second, "free", func(got *v1alpha1.RedisLock) bool { return got.Status.HolderIdentity == "" })
	if _, err := holder(t, "pod-b", s).Obtain(ctx, name, time.Minute); err != nil {
		t.Fatal(err)
	}
	got := waitLock(t, rl, 10*time.Second, "held by pod-b", func(got *v1alpha1.RedisLock) bool { return got.Status.HolderIdentity == "pod-b" })
	if got.Status.LeaderTransitions != 1 || transitions() != 1 {
		t.Fatalf("after pod-a, free, pod-b: status.leaderTransitions %d, metric %v; want 1 and 1", got.Status.LeaderTransitions, transitions())
	}
}

func TestForceReleaseAnnotation(t *testing.T) {
	ns, rl, l, _ := forceReleaseHeldLock(t, "stuck", func(*v1alpha1.RedisLock) {})
	// One reconcile releases, removes the annotation and clears the
	// holder: one metadata patch, one status apply.
	w := writesOf(t, rl)
	i := slices.IndexFunc(w, func(w []string) bool { return slices.Contains(w, reqPatch) })
	if i < 0 || !slices.Equal(w[i], []string{reqPatch, reqStatusApply}) {
		t.Fatalf("writes %q; want a reconcile that patched the annotation away, then applied the status", w)
	}
	if err := l.Refresh(context.Background()); !errors.Is(err, redislock.ErrLockLost) {
		t.Fatalf("holder after force release: %v, want ErrLockLost", err)
	}
	waitEvent(t, ns, "stuck", controller.EventForceReleased)
}

// When removing the annotation fails, the reconcile returns the error (the
// controller counts it and retries), and a later reconcile removes it.
func TestForceReleaseWhoseAnnotationRemovalFailsIsRetried(t *testing.T) {
	var errorsBefore float64
	_, rl, _, _ := forceReleaseHeldLock(t, "retried", func(rl *v1alpha1.RedisLock) {
		errorsBefore = reconcileErrors(t)
		requests.failNextPatch(rl)
	})
	if n := reconcileErrors(t); n < errorsBefore+1 {
		t.Fatalf("%v reconcile errors, %v before the failed patch; want the failure returned", n, errorsBefore)
	}
	if w := writesOf(t, rl); countWrites(w, reqPatch) < 2 {
		t.Fatalf("writes %q; want the failed patch, then one that removed the annotation", w)
	}
}

// A reconcile that reads a stale copy of the RedisLock, still annotated
// after the controller removed the annotation, does not force-release
// again: the holder granted since keeps the lock.
func TestStaleForceReleaseAnnotationReleasesNoOneElse(t *testing.T) {
	ns, rl, _, s := forceReleaseHeldLock(t, "stale", func(*v1alpha1.RedisLock) {})
	ctx := context.Background()
	// The old holder's time is up (its validity record goes, rather than
	// waiting out its minute), and another pod takes the lock.
	c := s.Client()
	defer func() { _ = c.Close() }()
	if err := c.Del(ctx, "redislock:{"+lockIn(ns)+"/stale}:until").Err(); err != nil {
		t.Fatal(err)
	}
	nl, err := holder(t, "next-pod", s).Obtain(ctx, lockIn(ns)+"/stale", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// The copy is as new as the controller's last write, so that the
	// reconcile goes ahead (see TestReconcileOfACopyOlderThanItsOwnWriteWritesNothing)
	// and the annotation is what it must not trust: as from a cache that
	// has not seen another process's removal.
	waitLock(t, rl, 5*time.Second, "next-pod", func(got *v1alpha1.RedisLock) bool { return got.Status.HolderIdentity == "next-pod" })
	var stale v1alpha1.RedisLock
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(rl), &stale); err != nil {
		t.Fatal(err)
	}
	stale.Annotations = map[string]string{controller.ForceReleaseAnnotation: "admin"}
	key := client.ObjectKeyFromObject(rl)
	requests.serveStale(&stale)
	// Reconciles of one object run one at a time: once the one after the
	// stale read has started, the stale one is done.
	waitFor(t, 3*resync, "the stale copy to be read", func() (bool, any) {
		requests.mu.Lock()
		defer requests.mu.Unlock()
		_, pending := requests.stale[key]
		return !pending, pending
	})
	waitReconciles(t, rl, len(requests.reconciles(key)), 1, 3*resync)
	if err := nl.Refresh(ctx); err != nil {
		t.Fatalf("the next holder after a reconcile of a stale, annotated copy: %v; want it to keep the lock", err)
	}
}

// A reconcile that reads a copy older than the controller's own last
// write (the cache has not caught up yet) writes nothing: redoing the
// write from the older state would apply the status again and record the
// holder change twice. The watch event of the write starts the next one.
func TestReconcileOfACopyOlderThanItsOwnWriteWritesNothing(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	ns := namespace(t)
	rl := redisLock(ns, "behind", v1alpha1.ModeStandalone, s.Addr)
	create(t, rl)
	ctx := context.Background()
	a, err := holder(t, "pod-a", s).Obtain(ctx, lockIn(ns)+"/behind", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	waitLock(t, rl, 5*time.Second, "pod-a", func(got *v1alpha1.RedisLock) bool { return got.Status.HolderIdentity == "pod-a" })
	var old v1alpha1.RedisLock
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(rl), &old); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := holder(t, "pod-b", s).Obtain(ctx, lockIn(ns)+"/behind", time.Minute); err != nil {
		t.Fatal(err)
	}
	waitLock(t, rl, 5*time.Second, "pod-b", func(got *v1alpha1.RedisLock) bool { return got.Status.HolderIdentity == "pod-b" })
	key := client.ObjectKeyFromObject(rl)
	requests.serveStale(&old)
	waitFor(t, 3*resync, "the older copy to be read", func() (bool, any) {
		requests.mu.Lock()
		defer requests.mu.Unlock()
		_, pending := requests.stale[key]
		return !pending, pending
	})
	requests.mu.Lock()
	id := requests.staleReads[len(requests.staleReads)-1]
	requests.mu.Unlock()
	// Reconciles of one object run one at a time: once the next one has
	// started, the one that read the older copy is done.
	waitReconciles(t, rl, len(requests.reconciles(key)), 1, 3*resync)
	if w := requests.writesIn(id); len(w) != 0 {
		t.Fatalf("the reconcile that read a copy older than its own write wrote %q; want nothing", w)
	}
	waitLock(t, rl, 5*time.Second, "pod-b still shown", func(got *v1alpha1.RedisLock) bool { return got.Status.HolderIdentity == "pod-b" })
}

// forceReleaseHeldLock creates the RedisLock name on a new Redis, has
// stuck-pod take its lock, calls prepare once the status shows it, sets
// the force-release annotation and waits until the controller released
// the lock and removed the annotation. It returns the namespace, the
// RedisLock and stuck-pod's lock.
func forceReleaseHeldLock(t *testing.T, name string, prepare func(*v1alpha1.RedisLock)) (string, *v1alpha1.RedisLock, *redislock.Lock, *redisproc.Server) {
	t.Helper()
	s := redistest.Start(t, redisproc.Options{})
	ns := namespace(t)
	rl := redisLock(ns, name, v1alpha1.ModeStandalone, s.Addr)
	create(t, rl)
	ctx := context.Background()
	l, err := holder(t, "stuck-pod", s).Obtain(ctx, lockIn(ns)+"/"+name, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got := waitLock(t, rl, 5*time.Second, "the holder", func(got *v1alpha1.RedisLock) bool { return got.Status.HolderIdentity == "stuck-pod" })
	prepare(got)
	got.Annotations = map[string]string{controller.ForceReleaseAnnotation: "admin"}
	if err := k8s.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	waitLock(t, rl, 10*time.Second, "release and annotation removed", func(got *v1alpha1.RedisLock) bool {
		_, still := got.Annotations[controller.ForceReleaseAnnotation]
		return got.Status.HolderIdentity == "" && !still
	})
	return ns, rl, l, s
}

// reconcileErrors reads controller_runtime_reconcile_errors_total of the
// redislock controller.
func reconcileErrors(t *testing.T) float64 {
	t.Helper()
	for _, m := range metricSeries(t, "controller_runtime_reconcile_errors_total") {
		if m.labels["controller"] == "redislock" {
			return m.value
		}
	}
	return 0
}

func waitEvent(t *testing.T, ns, name, reason string) {
	t.Helper()
	waitFor(t, 5*time.Second, "a "+reason+" event on "+ns+"/"+name, func() (bool, any) {
		n := countEvents(t, ns, name, reason)
		return n > 0, fmt.Sprintf("%d events", n)
	})
}

func TestDeletionPolicy(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	ns := namespace(t)
	ctx := context.Background()
	rc := s.Client()
	defer func() { _ = rc.Close() }()
	for _, policy := range []v1alpha1.DeletionPolicy{v1alpha1.DeletionRetain, v1alpha1.DeletionRelease} {
		t.Run(string(policy), func(t *testing.T) {
			name := strings.ToLower(string(policy))
			rl := redisLock(ns, name, v1alpha1.ModeStandalone, s.Addr)
			rl.Spec.DeletionPolicy = policy
			create(t, rl)
			if _, err := holder(t, "pod", s).Obtain(ctx, lockIn(ns)+"/"+name, time.Minute); err != nil {
				t.Fatal(err)
			}
			got := waitLock(t, rl, 5*time.Second, "the holder", func(got *v1alpha1.RedisLock) bool { return got.Status.HolderIdentity == "pod" })
			if got.Spec.Scope != v1alpha1.ScopeCluster || got.Status.ClusterID != clusterID || got.Status.LockName != lockIn(ns)+"/"+name {
				t.Fatalf("scope %q, status clusterID %q and lockName %q; want Cluster by default, %q and the name the holder took", got.Spec.Scope, got.Status.ClusterID, got.Status.LockName, clusterID)
			}
			release := policy == v1alpha1.DeletionRelease
			if has := slices.Contains(got.Finalizers, controller.Finalizer); has != release {
				t.Fatalf("finalizers %v with policy %s", got.Finalizers, policy)
			}
			// The first reconcile adds the finalizer and the status with
			// one write of each.
			w0 := writesOf(t, rl)
			if release && !slices.Equal(w0[0], []string{reqPatch, reqStatusApply}) {
				t.Fatalf("writes of the first reconcile %q; want the finalizer patched, then the status applied", w0[0])
			}
			if err := k8s.Delete(ctx, got); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 5*time.Second, "the RedisLock gone", func() (bool, any) {
				err := k8s.Get(ctx, client.ObjectKeyFromObject(rl), &v1alpha1.RedisLock{})
				return apierrors.IsNotFound(err), err
			})
			// Finalizing patches the finalizer away, once, and writes
			// nothing else: a reconcile that reads the object from a
			// cache that has not yet seen the finalizer go confirms with
			// the API server and does nothing.
			w := writesOf(t, rl)
			if !release && countWrites(w, reqPatch) != 0 {
				t.Fatalf("writes %q with Retain; want no metadata patch", w)
			}
			deleting := w[len(w0):]
			if release && !slices.EqualFunc(deleting, [][]string{{reqPatch}}, slices.Equal) {
				t.Fatalf("writes after the delete %q; want the finalizer patched away once, and nothing else", deleting)
			}
			n, err := rc.Exists(ctx, "redislock:{"+lockIn(ns)+"/"+name+"}").Result()
			if err != nil {
				t.Fatal(err)
			}
			if want := map[v1alpha1.DeletionPolicy]int64{v1alpha1.DeletionRetain: 1, v1alpha1.DeletionRelease: 0}[policy]; n != want {
				t.Fatalf("key exists %d after delete with %s, want %d", n, policy, want)
			}
		})
	}
}

func TestBadSecretAndWrongPassword(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{Password: "right"})
	ns := namespace(t)
	rl := redisLock(ns, "auth", v1alpha1.ModeStandalone, s.Addr)
	rl.Spec.Redis.PasswordSecretRef = &v1alpha1.SecretKeyRef{Name: "redis-auth", Key: "password"}
	create(t, rl)
	got := waitLock(t, rl, 5*time.Second, "SecretNotFound", isCond(v1alpha1.ConditionReady, metav1.ConditionFalse, controller.ReasonSecretNotFound))
	if msg := condition(got, v1alpha1.ConditionReady).Message; !strings.Contains(msg, "spec.redis.passwordSecretRef") || !strings.Contains(msg, "redis-auth") {
		t.Fatalf("message %q does not name the field and Secret", msg)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "redis-auth"}, Data: map[string][]byte{"password": []byte("wrong")}}
	create(t, secret)
	got = waitLock(t, rl, 5*time.Second, "NoQuorum from a wrong password", isCond(v1alpha1.ConditionReady, metav1.ConditionFalse, controller.ReasonNoQuorum))
	if c := condition(got, v1alpha1.ConditionRedisReachable); c.Reason != controller.ReasonAuthenticationFailed || c.Message != s.Addr+": "+controller.FaultMessage(c.Reason) {
		t.Fatalf("RedisReachable %s %q; want %s, with its message", c.Reason, c.Message, controller.ReasonAuthenticationFailed)
	}
	secret.Data["password"] = []byte("right")
	if err := k8s.Update(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	waitLock(t, rl, 10*time.Second, "Ready once the password is right", isCond(v1alpha1.ConditionReady, metav1.ConditionTrue, controller.ReasonReady))
}

// readyWithValue creates the RedisLock name in a new namespace, on a new
// server, waits for it to be Ready, then writes value as its lock key and
// waits for the status to call it a malformed value. It returns the
// server, the namespace and the lock.
func readyWithValue(t *testing.T, name, value string) (*redisproc.Server, string, *v1alpha1.RedisLock) {
	t.Helper()
	s := redistest.Start(t, redisproc.Options{})
	ns := namespace(t)
	rl := redisLock(ns, name, v1alpha1.ModeStandalone, s.Addr)
	create(t, rl)
	waitLock(t, rl, 5*time.Second, "Ready", isCond(v1alpha1.ConditionReady, metav1.ConditionTrue, controller.ReasonReady))
	rc := s.Client()
	defer func() { _ = rc.Close() }()
	if err := rc.Set(context.Background(), "redislock:{"+lockIn(ns)+"/"+name+"}", value, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	waitLock(t, rl, 2*resync, "MalformedValue", isCond(v1alpha1.ConditionReady, metav1.ConditionFalse, controller.ReasonMalformedValue))
	return s, ns, rl
}

func TestRedisDownAndGarbage(t *testing.T) {
	s, ns, rl := readyWithValue(t, "faults", "garbage")

	s.Kill()
	got := waitLock(t, rl, 3*resync, "RedisReachable False", isCond(v1alpha1.ConditionRedisReachable, metav1.ConditionFalse, controller.ReasonUnreachable))
	if c := condition(got, v1alpha1.ConditionReady); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, s.Addr) {
		t.Fatalf("Ready %+v; want False naming %s", c, s.Addr)
	}
	waitEvent(t, ns, "faults", controller.EventRedisUnreachable)
}

// A tenant's server can write any bytes as a lock's holder. A holder that
// is not valid UTF-8 (which no series label may carry: a registry that met
// one would fail every scrape, every tenant's series with it) is a
// malformed value (the status says so in the controller's own words, as
// for any value it did not write), with no holder series; the scrape goes
// on.
func TestAHolderThatIsNotUTF8IsMalformed(t *testing.T) {
	_, ns, _ := readyWithValue(t, "bytes", "v1:"+strings.Repeat("ab", 16)+":pod-\xff\xfe")
	if h := holderSeries(t, ns, "bytes"); len(h) != 0 {
		t.Fatalf("holder series %q for a malformed holder; want none", h)
	}
}

func TestRedlockNodesInStatus(t *testing.T) {
	servers := redistest.StartN(t, 3)
	ns := namespace(t)
	rl := redisLock(ns, "quorum", v1alpha1.ModeRedlock, servers[0].Addr, servers[1].Addr, servers[2].Addr)
	create(t, rl)
	if _, err := holder(t, "pod", servers...).Obtain(context.Background(), lockIn(ns)+"/quorum", time.Minute); err != nil {
		t.Fatal(err)
	}
	waitLock(t, rl, 5*time.Second, "holder and 3 reachable nodes", func(got *v1alpha1.RedisLock) bool {
		return got.Status.HolderIdentity == "pod" && len(got.Status.Nodes) == 3 && got.Status.Nodes[0].Reachable && got.Status.Nodes[2].Reachable
	})
	servers[1].Kill()
	got := waitLock(t, rl, 3*resync, "node 1 unreachable", func(got *v1alpha1.RedisLock) bool {
		return len(got.Status.Nodes) == 3 && !got.Status.Nodes[1].Reachable
	})
	if got.Status.HolderIdentity != "pod" || condition(got, v1alpha1.ConditionReady).Status != metav1.ConditionTrue || got.Status.Nodes[1].Message == "" {
		t.Fatalf("with one of three nodes down: %+v; want still held and Ready, with the node's error", got.Status)
	}
}

// The controller shares one set of Redis clients per connection config
// and closes them when the last RedisLock using them goes.
func TestRedisClientsClosedWhenUnused(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	ns := namespace(t)
	ctx := context.Background()
	const observer = "test-observer"
	rc := redis.NewClient(&redis.Options{Addr: s.Addr, ClientName: observer})
	defer func() { _ = rc.Close() }()
	// controllerConns lists the IDs of the server's connections but this
	// test's own: the controller's, as CLIENT LIST shows them.
	controllerConns := func() []string {
		list, err := rc.ClientList(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for line := range strings.Lines(list) {
			fields := strings.Fields(line)
			if len(fields) == 0 || slices.Contains(fields, "name="+observer) {
				continue
			}
			ids = append(ids, strings.TrimPrefix(fields[0], "id="))
		}
		return ids
	}
	a := redisLock(ns, "a", v1alpha1.ModeStandalone, s.Addr)
	b := redisLock(ns, "b", v1alpha1.ModeStandalone, s.Addr)
	create(t, a, b)
	for _, rl := range []*v1alpha1.RedisLock{a, b} {
		waitLock(t, rl, 5*time.Second, "Ready", isCond(v1alpha1.ConditionReady, metav1.ConditionTrue, controller.ReasonReady))
	}
	shared := controllerConns()
	if len(shared) == 0 {
		t.Fatal("no controller connection to Redis while two RedisLocks use it")
	}
	if err := k8s.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	// The controller drops a's metrics right after it lets go of a's
	// clients; b still uses them, so every one stays open, not reopened.
	waitFor(t, 10*time.Second, "the controller to drop a's metrics", func() (bool, any) {
		n := len(metricSeriesOf(t, ns, "a"))
		return n == 0, fmt.Sprintf("%d series of a", n)
	})
	if now := controllerConns(); !isSubset(shared, now) {
		t.Fatalf("controller connections %v after a went, %v before; want every one kept open for b", now, shared)
	}
	if err := k8s.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "every controller connection closed after both RedisLocks went", func() (bool, any) {
		ids := controllerConns()
		return len(ids) == 0, fmt.Sprintf("connections %v", ids)
	})
}

// isSubset reports whether every element of sub is in set.
func isSubset(sub, set []string) bool {
	for _, e := range sub {
		if !slices.Contains(set, e) {
			return false
		}
	}
	return true
}

// metricSeriesOf returns every series of the controller's metrics that
// belongs to the RedisLock ns/name.
func metricSeriesOf(t *testing.T, ns, name string) []series {
	t.Helper()
	var out []series
	for _, metric := range []string{"redislock_ready", "redislock_eviction_risk", "redislock_holder_info"} {
		for _, m := range metricSeries(t, metric) {
			if m.labels["namespace"] == ns && m.labels["name"] == name {
				out = append(out, m)
			}
		}
	}
	return out
}

// The spec's Sentinel and Cluster modes reach Redis the way go-redis users
// expect: the status shows the holder of a lock taken on that deployment,
// and on a Cluster the controller listens to the lock's shard channel.
func TestSentinelAndClusterModes(t *testing.T) {
	master := redistest.Start(t, redisproc.Options{})
	sentinel := redistest.Start(t, redisproc.Options{SentinelFor: "mymaster " + master.Addr})
	clusterAddrs := redistest.StartCluster(t, 3)
	ns := namespace(t)
	ctx := context.Background()

	sl := redisLock(ns, "via-sentinel", v1alpha1.ModeSentinel, sentinel.Addr)
	sl.Spec.Redis.MasterName = "mymaster"
	cl := redisLock(ns, "on-cluster", v1alpha1.ModeCluster, clusterAddrs...)
	create(t, sl, cl)

	if _, err := holder(t, "pod-s", master).Obtain(ctx, lockIn(ns)+"/via-sentinel", time.Minute); err != nil {
		t.Fatal(err)
	}
	cc := redistest.ClusterClient(t, clusterAddrs)
	lc, err := redislock.New([]redis.UniversalClient{cc}, &redislock.Options{AssumeDurable: true, Identity: "pod-c"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lc.Obtain(ctx, lockIn(ns)+"/on-cluster", time.Minute); err != nil {
		t.Fatal(err)
	}
	waitLock(t, sl, 10*time.Second, "the Sentinel lock's holder", func(got *v1alpha1.RedisLock) bool { return got.Status.HolderIdentity == "pod-s" })
	waitLock(t, cl, 10*time.Second, "the Cluster lock's holder", func(got *v1alpha1.RedisLock) bool { return got.Status.HolderIdentity == "pod-c" })
	// On a Cluster the lock's events are shard messages (SPUBLISH): the
	// controller hears them only through a shard subscription, the one
	// subscription on these nodes.
	shardChannels := 0
	for _, addr := range clusterAddrs {
		c := redis.NewClient(&redis.Options{Addr: addr})
		chans, err := c.PubSubShardChannels(ctx, "*").Result()
		_ = c.Close()
		if err != nil {
			t.Fatal(err)
		}
		shardChannels += len(chans)
	}
	if shardChannels != 1 {
		t.Errorf("%d shard channels subscribed on the Cluster; want 1, the controller's of its lock", shardChannels)
	}
}

// TLS with the CA from a Secret: Ready with the right CA, an x509 error
// with another one.
func TestTLSWithCAFromSecret(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{TLS: true})
	other := redistest.Start(t, redisproc.Options{TLS: true}) // its CA signs nothing of s
	ns := namespace(t)
	ctx := context.Background()
	ca := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "redis-ca"}, Data: map[string][]byte{"ca.crt": other.CAPEM}}
	create(t, ca)
	rl := redisLock(ns, "tls", v1alpha1.ModeStandalone, s.Addr)
	rl.Spec.Redis.TLS = &v1alpha1.RedisTLS{CASecretRef: &v1alpha1.SecretKeyRef{Name: "redis-ca", Key: "ca.crt"}}
	create(t, rl)
	got := waitLock(t, rl, 10*time.Second, "an unverifiable certificate", isCond(v1alpha1.ConditionReady, metav1.ConditionFalse, controller.ReasonNoQuorum))
	if c := condition(got, v1alpha1.ConditionRedisReachable); c.Reason != controller.ReasonTLSVerificationFailed {
		t.Fatalf("RedisReachable %s %q; want %s", c.Reason, c.Message, controller.ReasonTLSVerificationFailed)
	}
	ca.Data["ca.crt"] = s.CAPEM
	if err := k8s.Update(ctx, ca); err != nil {
		t.Fatal(err)
	}
	waitLock(t, rl, 10*time.Second, "Ready over TLS", isCond(v1alpha1.ConditionReady, metav1.ConditionTrue, controller.ReasonReady))
	if _, err := holder(t, "tls-pod", s).Obtain(ctx, lockIn(ns)+"/tls", time.Minute); err != nil {
		t.Fatal(err)
	}
	waitLock(t, rl, 5*time.Second, "the holder over TLS", func(got *v1alpha1.RedisLock) bool { return got.Status.HolderIdentity == "tls-pod" })
}

// Mutual TLS with a kubernetes.io/tls Secret, as cert-manager issues: a
// key that does not parse makes the lock InvalidSpec, naming the field;
// once the Secret holds the right key, the lock is Ready on a server that
// requires client certificates.
func TestMutualTLSWithClientCertificateFromSecret(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{TLS: true, TLSClientAuth: true})
	ns := namespace(t)
	ctx := context.Background()
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "redis-ca"}, Data: map[string][]byte{"ca.crt": s.CAPEM}})
	cert := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "client-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: s.ClientCertPEM, corev1.TLSPrivateKeyKey: []byte("not a key")}}
	create(t, cert)
	rl := redisLock(ns, "mtls", v1alpha1.ModeStandalone, s.Addr)
	rl.Spec.Redis.TLS = &v1alpha1.RedisTLS{CASecretRef: &v1alpha1.SecretKeyRef{Name: "redis-ca", Key: "ca.crt"}, CertSecretRef: &v1alpha1.SecretRef{Name: "client-tls"}}
	create(t, rl)
	got := waitLock(t, rl, 10*time.Second, "a key that does not parse", isCond(v1alpha1.ConditionReady, metav1.ConditionFalse, controller.ReasonInvalidSpec))
	if msg := condition(got, v1alpha1.ConditionReady).Message; !strings.Contains(msg, "spec.redis.tls.certSecretRef") || !strings.Contains(msg, "client-tls") {
		t.Fatalf("message %q does not name the field and Secret", msg)
	}
	cert.Data[corev1.TLSPrivateKeyKey] = s.ClientKeyPEM
	if err := k8s.Update(ctx, cert); err != nil {
		t.Fatal(err)
	}
	waitLock(t, rl, 10*time.Second, "Ready over mutual TLS", isCond(v1alpha1.ConditionReady, metav1.ConditionTrue, controller.ReasonReady))
}

// countEvents counts the events of reason on ns/name.
func countEvents(t *testing.T, ns, name, reason string) int {
	t.Helper()
	var list eventsv1.EventList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Reason == reason {
			n += max(1, int(e.DeprecatedCount))
			if e.Series != nil {
				n += int(e.Series.Count) - 1
			}
		}
	}
	return n
}

// During a Redis outage the controller keeps looking every few
// renewIntervals, then once per breaker period (never with the error
// backoff, which grows to many minutes), reports the outage once, and
// shows the right state within a resync and a breaker period of Redis's
// return.
func TestOutageIsReportedOnceAndStatusRecoversWithinAResync(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	ns := namespace(t)
	rl := redisLock(ns, "outage", v1alpha1.ModeStandalone, s.Addr)
	create(t, rl)
	waitLock(t, rl, 5*time.Second, "Ready", isCond(v1alpha1.ConditionReady, metav1.ConditionTrue, controller.ReasonReady))
	s.Kill()
	waitLock(t, rl, 3*resync, "RedisReachable False", isCond(v1alpha1.ConditionRedisReachable, metav1.ConditionFalse, controller.ReasonUnreachable))
	waitEvent(t, ns, "outage", controller.EventRedisUnreachable)
	// Looks later, still one event: a lasting fault is told once. After
	// two failed looks the connection's breaker opens, so the lock is
	// looked at (and Redis asked) once per breakerOpen (5s), not every 4
	// renewIntervals.
	before := redisErrors(t, ns, "outage")
	waitFor(t, 20*time.Second, "the controller to ask Redis again twice", func() (bool, any) {
		n := redisErrors(t, ns, "outage")
		return n >= before+2, fmt.Sprintf("%v errors counted, %v before", n, before)
	})
	if n := countEvents(t, ns, "outage", controller.EventRedisUnreachable); n != 1 {
		t.Fatalf("%d RedisUnreachable events for one outage; want 1", n)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	// Within the breaker's 5s, then one look.
	waitLock(t, rl, resync+5*time.Second+2*time.Second, "Ready again", isCond(v1alpha1.ConditionReady, metav1.ConditionTrue, controller.ReasonReady))
	t.Logf("status Ready %v after Redis came back (resync %v, breaker 5s)", time.Since(back).Round(time.Millisecond), resync)
}

// redisErrors reads redislock_redis_errors_total of ns/name from the
// controller's registry.
func redisErrors(t *testing.T, ns, name string) float64 {
	t.Helper()
	var n float64
	for _, m := range metricSeries(t, "redislock_redis_errors_total") {
		if m.labels["namespace"] == ns && m.labels["name"] == name {
			n += m.value
		}
	}
	return n
}

// Status tells the truth (D1): in Redlock mode a holder is shown only when
// a majority of nodes holds its value; a key without an expiry is flagged;
// leaderTransitions counts changes even after Redis lost its counters.
func TestStatusShowsOnlyAMajorityHolderAndFlagsKeysThatNeverExpire(t *testing.T) {
	servers := redistest.StartN(t, 3)
	ns := namespace(t)
	rl := redisLock(ns, "truth", v1alpha1.ModeRedlock, servers[0].Addr, servers[1].Addr, servers[2].Addr)
	create(t, rl)
	key := "redislock:{" + lockIn(ns) + "/truth}"
	clients := redistest.Clients(t, servers...)
	ctx := context.Background()
	// Two candidates split the nodes: neither leads.
	for i, who := range []string{"x", "y"} {
		v := "v1:" + strings.Repeat(fmt.Sprint(i+1), 32) + ":" + who // the value format of pkg/redislock's value.go
		if err := clients[i].Set(ctx, key, v, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := clients[2].Set(ctx, key+":fence", 7, 0).Err(); err != nil {
		t.Fatal(err)
	}
	got := waitLock(t, rl, 3*resync, "Held=False with a split", isCond(v1alpha1.ConditionHeld, metav1.ConditionFalse, controller.ReasonFree))
	if got.Status.HolderIdentity != "" {
		t.Fatalf("holder %q shown with no majority", got.Status.HolderIdentity)
	}
	for _, c := range clients {
		if err := c.Del(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
	}

	l, err := holder(t, "a", servers...).Obtain(ctx, lockIn(ns)+"/truth", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	waitLock(t, rl, 3*resync, "held by a", func(got *v1alpha1.RedisLock) bool { return got.Status.HolderIdentity == "a" })
	for _, c := range clients {
		if err := c.Persist(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
	}
	got = waitLock(t, rl, 3*resync, "NoExpiry", isCond(v1alpha1.ConditionReady, metav1.ConditionFalse, controller.ReasonNoExpiry))
	if c := condition(got, v1alpha1.ConditionHeld); c.Reason != controller.ReasonNoExpiry || !strings.Contains(c.Message, "no expiry") {
		t.Fatalf("Held %+v; want it to flag the key without an expiry", c)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	waitLock(t, rl, 3*resync, "free", func(got *v1alpha1.RedisLock) bool { return got.Status.HolderIdentity == "" })
	// Redis loses everything; the next holder is still a transition.
	for _, c := range clients {
		if err := c.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	waitLock(t, rl, 3*resync, "free after the flush", isCond(v1alpha1.ConditionHeld, metav1.ConditionFalse, controller.ReasonFree))
	if _, err := holder(t, "b", servers...).Obtain(ctx, lockIn(ns)+"/truth", time.Minute); err != nil {
		t.Fatal(err)
	}
	got = waitLock(t, rl, 3*resync, "held by b", func(got *v1alpha1.RedisLock) bool { return got.Status.HolderIdentity == "b" })
	if got.Status.LeaderTransitions != 1 {
		t.Fatalf("leaderTransitions %d after a, then b (with Redis flushed between); want 1", got.Status.LeaderTransitions)
	}
}

// waitFor polls cond, at once and then every 20ms, until it holds,
// failing t after timeout with what it awaited and the value cond last
// saw (its second result).
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, any)) {
	t.Helper()
	var last any
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		var ok bool
		ok, last = cond()
		return ok, nil
	})
	if err != nil {
		t.Fatalf("timed out after %v waiting for %s; last seen: %v", timeout, what, last)
	}
}

// Two Redlock addresses that reach one server are refused at run time,
// naming both: the server would count twice in the quorum.
func TestRedlockNodesThatAreOneServerAreRefused(t *testing.T) {
	servers := redistest.StartN(t, 2)
	_, port, err := net.SplitHostPort(servers[0].Addr)
	if err != nil {
		t.Fatal(err)
	}
	alias := net.JoinHostPort("localhost", port)
	ns := namespace(t)
	rl := redisLock(ns, "twice", v1alpha1.ModeRedlock, servers[0].Addr, alias, servers[1].Addr)
	create(t, rl)
	got := waitLock(t, rl, 3*resync, "InvalidSpec", isCond(v1alpha1.ConditionReady, metav1.ConditionFalse, controller.ReasonInvalidSpec))
	if c := condition(got, v1alpha1.ConditionReady); !strings.Contains(c.Message, servers[0].Addr) || !strings.Contains(c.Message, alias) {
		t.Fatalf("Ready %+v; want the message to name %s and %s", c, servers[0].Addr, alias)
	}
}

// A node that can evict lock keys shows in the status, once in the events
// and in a metric; the condition clears when the policy is fixed.
func TestEvictionPolicyIsFlagged(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{Args: []string{"--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru"}})
	ns := namespace(t)
	rl := redisLock(ns, "evict", v1alpha1.ModeStandalone, s.Addr)
	create(t, rl)
	got := waitLock(t, rl, 3*resync, "EvictionSafe False", isCond(controller.ConditionEvictionSafe, metav1.ConditionFalse, controller.ReasonEvictionPolicy))
	// The policy is the server's text: the log has it, not the status.
	if c := condition(got, controller.ConditionEvictionSafe); strings.Contains(c.Message, "allkeys-lru") || !strings.Contains(c.Message, "maxmemory-policy noeviction") {
		t.Fatalf("EvictionSafe %+v; want the fix named, and not the server's INFO", c)
	}
	waitEvent(t, ns, "evict", controller.ReasonEvictionPolicy)
	if c := condition(got, v1alpha1.ConditionReady); c.Status != metav1.ConditionTrue {
		t.Fatalf("Ready %+v with evictingNodes Warn; want True", c)
	}
	// With Refuse, the lock is not Ready and candidates do not campaign.
	strict := redisLock(ns, "strict", v1alpha1.ModeStandalone, s.Addr)
	strict.Spec.Redis.EvictingNodes = v1alpha1.EvictingNodesRefuse
	create(t, strict)
	waitLock(t, strict, 3*resync, "Ready False", isCond(v1alpha1.ConditionReady, metav1.ConditionFalse, controller.ReasonEvictionPolicy))
	if _, err := redisconn.OpenCandidate(context.Background(), k8s, client.ObjectKeyFromObject(strict), "", redislock.Options{Identity: "c"}); !errors.Is(err, redislock.ErrEvictionPolicy) || !strings.Contains(err.Error(), "allkeys-lru") {
		t.Fatalf("a candidate of the Refuse lock: %v; want ErrEvictionPolicy naming the policy", err)
	}
	cand, err := redisconn.OpenCandidate(context.Background(), k8s, client.ObjectKeyFromObject(rl), "", redislock.Options{Identity: "c"})
	if err != nil {
		t.Fatalf("a candidate of the Warn lock: %v", err)
	}
	cand.Close()
	rc := s.Client()
	defer func() { _ = rc.Close() }()
	if err := rc.ConfigSet(context.Background(), "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	waitLock(t, rl, 3*resync, "EvictionSafe True", isCond(controller.ConditionEvictionSafe, metav1.ConditionTrue, controller.ReasonNoEviction))
	if n := countEvents(t, ns, "evict", controller.ReasonEvictionPolicy); n != 1 {
		t.Fatalf("%d EvictionPolicy events; want 1", n)
	}
}

// One RedisLock whose duration Go cannot parse (stored before the CRD
// refused such text) neither stops the controller nor the others: it gets
// InvalidSpec naming the field, and a good lock created after it gets its
// status as usual. The test loosens the CRD to store the bad object, as an
// older CRD did, and restores it.
func TestUndecodableDurationStopsNothing(t *testing.T) {
	ctx := context.Background()
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	if err := k8s.Get(ctx, client.ObjectKey{Name: "redislocks.redislock.io"}, crd); err != nil {
		t.Fatal(err)
	}
	original := crd.DeepCopy()
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		spec, _, _ := unstructured.NestedMap(v.(map[string]any), "schema", "openAPIV3Schema", "properties", "spec")
		dropValidations(spec)
		if err := unstructured.SetNestedMap(v.(map[string]any), spec, "schema", "openAPIV3Schema", "properties", "spec"); err != nil {
			t.Fatal(err)
		}
	}
	if err := unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions"); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Update(ctx, crd); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if restored {
			return
		}
		restored = true
		var now unstructured.Unstructured
		now.SetGroupVersionKind(crd.GroupVersionKind())
		if err := k8s.Get(ctx, client.ObjectKey{Name: "redislocks.redislock.io"}, &now); err != nil {
			t.Error(err)
			return
		}
		original.SetResourceVersion(now.GetResourceVersion())
		if err := k8s.Update(ctx, original); err != nil {
			t.Errorf("restore the CRD: %v", err)
		}
	}
	t.Cleanup(restore)

	s := redistest.Start(t, redisproc.Options{})
	ns := namespace(t)
	bad := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "redislock.io/v1alpha1", "kind": "RedisLock",
		"metadata": map[string]any{"namespace": ns, "name": "bad"},
		"spec":     map[string]any{"ttl": "1d", "redis": map[string]any{"addrs": []any{s.Addr}}},
	}}
	// The loosened schema takes a moment to be served.
	waitFor(t, 10*time.Second, "the loosened CRD to store ttl 1d", func() (bool, any) {
		err := k8s.Create(ctx, bad.DeepCopy())
		return err == nil, err
	})
	restore()
	good := redisLock(ns, "good", v1alpha1.ModeStandalone, s.Addr)
	create(t, good)
	waitLock(t, good, 5*time.Second, "the good lock Ready", isCond(v1alpha1.ConditionReady, metav1.ConditionTrue, controller.ReasonReady))
	got := waitLock(t, &v1alpha1.RedisLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad"}}, 5*time.Second, "the bad lock InvalidSpec",
		isCond(v1alpha1.ConditionReady, metav1.ConditionFalse, controller.ReasonInvalidSpec))
	if c := condition(got, v1alpha1.ConditionReady); !strings.Contains(c.Message, "spec.ttl") || !strings.Contains(c.Message, `"1d"`) {
		t.Fatalf("Ready %+v; want the message to name spec.ttl and its text", c)
	}
	// And in a metric, for alerts.
	if v := gauge(t, "redislock_ready", map[string]string{"namespace": ns, "name": "bad", "reason": controller.ReasonInvalidSpec}); v != 0 {
		t.Fatalf("redislock_ready{bad, InvalidSpec} = %v; want 0", v)
	}
	if v := gauge(t, "redislock_ready", map[string]string{"namespace": ns, "name": "good", "reason": controller.ReasonReady}); v != 1 {
		t.Fatalf("redislock_ready{good, Ready} = %v; want 1", v)
	}
}

// gauge reads the gauge name with exactly labels from the controller's
// registry; -1 when there is no such series.
func gauge(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	for _, m := range metricSeries(t, name) {
		if maps.Equal(m.labels, labels) {
			return m.value
		}
	}
	return -1
}

// dropValidations removes every CEL rule, pattern and length limit from a
// schema tree.
func dropValidations(schema map[string]any) {
	delete(schema, "x-kubernetes-validations")
	delete(schema, "maxLength")
	for _, v := range schema {
		switch v := v.(type) {
		case map[string]any:
			dropValidations(v)
		case []any:
			for _, e := range v {
				if m, ok := e.(map[string]any); ok {
					dropValidations(m)
				}
			}
		}
	}
}

// Status fields an Update wrote (an older controller, which did not apply
// its status) are taken over, so a holder that is gone is cleared rather
// than left behind by an apply that omits it.
func TestStatusWrittenByUpdateIsTakenOver(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	ns := namespace(t)
	rl := redisLock(ns, "upgraded", v1alpha1.ModeStandalone, s.Addr)
	create(t, rl)
	waitLock(t, rl, 5*time.Second, "Ready", isCond(v1alpha1.ConditionReady, metav1.ConditionTrue, controller.ReasonReady))
	// As the previous version wrote it: a full status update, by another
	// field manager, naming a holder the lock no longer has.
	var got v1alpha1.RedisLock
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(rl), &got); err != nil {
		t.Fatal(err)
	}
	got.Status.HolderIdentity = "old-holder"
	got.Status.AcquireTime = &metav1.Time{Time: time.Now()}
	if err := k8s.Status().Update(context.Background(), &got, client.FieldOwner("redislock-v0")); err != nil {
		t.Fatal(err)
	}
	waitLock(t, rl, 3*resync, "the stale holder cleared", func(got *v1alpha1.RedisLock) bool {
		return got.Status.HolderIdentity == "" && got.Status.AcquireTime == nil
	})
}
