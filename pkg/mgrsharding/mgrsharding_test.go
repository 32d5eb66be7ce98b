package mgrsharding_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redisstats"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/internal/testing/testenv"
	"github.com/redislock/redislock/pkg/election"
	"github.com/redislock/redislock/pkg/mgrsharding"
	"github.com/redislock/redislock/pkg/redisconn"
	"github.com/redislock/redislock/pkg/redislock"
)

var (
	cfg *rest.Config
	k8s client.Client
)

func TestMain(m *testing.M) {
	testenv.Main("../..", &envtest.Environment{}, true, func(c *rest.Config) (int, error) {
		var err error
		if k8s, err = testenv.Client(c); err != nil {
			return 0, err
		}
		cfg = c
		return m.Run(), nil
	})
}

// ttl is the sharded RedisLocks' ttl: the restart guard holds a fresh
// server's grants back for as long.
const ttl = 4 * time.Second

// shardedLock creates a RedisLock of shards shards on addr.
func shardedLock(t *testing.T, name, addr string, shards int32) types.NamespacedName {
	t.Helper()
	rl := &v1alpha1.RedisLock{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: v1alpha1.RedisLockSpec{
			Redis:  &v1alpha1.RedisConnectionSpec{Mode: v1alpha1.ModeStandalone, Addrs: []string{addr}},
			TTL:    &v1alpha1.Duration{Duration: ttl},
			Shards: &shards,
		},
	}
	if err := k8s.Create(context.Background(), rl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), rl) })
	return types.NamespacedName{Namespace: rl.Namespace, Name: rl.Name}
}

// namespace creates a namespace for one test.
func namespace(t *testing.T, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), ns) })
	return name
}

// waitFor polls cond every 10ms until it holds, or fails the test after
// timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, timeout, true, func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// reconciled is one reconcile of one object, as the ledger keeps it.
type reconciled struct {
	replica    string
	obj        types.NamespacedName
	shard      redislock.Shard
	start, end time.Time
}

// ledger records every reconcile of every replica.
type ledger struct {
	mu      sync.Mutex
	entries []reconciled
}

// all is a copy of the entries so far; replicas may be adding more.
func (l *ledger) all() []reconciled {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.entries)
}

func (l *ledger) add(e reconciled) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, e)
}

// faults returns the pairs of reconciles of one object by two replicas
// at overlapping times, and the pairs where a later grant of a shard had
// a token no greater than an earlier one's.
func (l *ledger) faults() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for i, a := range l.entries {
		for _, b := range l.entries[i+1:] {
			if a.replica == b.replica {
				continue
			}
			if a.obj == b.obj && a.start.Before(b.end) && b.start.Before(a.end) {
				out = append(out, fmt.Sprintf("%s reconciled by %s (%v–%v) and %s (%v–%v)", a.obj, a.replica, a.start.Format(time.StampMicro), a.end.Format(time.StampMicro), b.replica, b.start.Format(time.StampMicro), b.end.Format(time.StampMicro)))
			}
			if a.shard.Index == b.shard.Index && a.shard.Fence == b.shard.Fence {
				out = append(out, fmt.Sprintf("shard %d with token %d on %s and %s", a.shard.Index, a.shard.Fence, a.replica, b.replica))
			}
		}
	}
	return out
}

// replica is one replica of a sharded operator: a manager on its own
// Sharding, reconciling ConfigMaps of one namespace by writing its name
// into annotation owner.
type replica struct {
	id   string
	sh   *mgrsharding.Sharding
	stop func()
}

const owner = "example.com/owner"

// startReplica runs replica id of the operator on the RedisLock ref.
func startReplica(t *testing.T, ref types.NamespacedName, ns, id string, led *ledger, requeue bool) *replica {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	sh, err := mgrsharding.ForRedisLock(ctx, cfg, ref, id)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := manager.New(sh.Gate(counting(cfg, &writes)), manager.Options{
		Scheme:                 k8s.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.Add(sh); err != nil {
		t.Fatal(err)
	}
	c := mgr.GetClient()
	r := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		e := reconciled{replica: id, obj: req.NamespacedName, start: time.Now()}
		defer func() { e.end = time.Now(); led.add(e) }()
		var ok bool
		if e.shard, ok = mgrsharding.FromContext(ctx); !ok {
			return reconcile.Result{}, errors.New("no shard in the reconcile's context")
		}
		var cm corev1.ConfigMap
		if err := c.Get(ctx, req.NamespacedName, &cm); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		// Work that does not watch ctx, as much work does not: the
		// shard must not move before it ends.
		time.Sleep(20 * time.Millisecond)
		v := fmt.Sprintf("%s/%d/%d", id, e.shard.Index, e.shard.Fence)
		if cm.Annotations[owner] == v {
			return reconcile.Result{}, nil
		}
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		cm.Annotations[owner] = v
		return reconcile.Result{}, c.Update(ctx, &cm)
	})
	b := builder.ControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Named("configmaps").
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false), SkipNameValidation: ptr.To(true), MaxConcurrentReconciles: 4})
	if requeue {
		b = b.WatchesRawSource(sh.Requeue(mgr.GetCache(), &corev1.ConfigMapList{}))
	}
	if err := b.Complete(sh.Reconciler(r)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	rp := &replica{id: id, sh: sh}
	var once sync.Once
	rp.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("replica %s: %v", id, err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("replica %s did not stop within 30s", id)
			}
			sh.Close()
		})
	}
	t.Cleanup(rp.stop)
	return rp
}

// settled says the live replicas hold every shard between them, balanced,
// and every ConfigMap of ns names the replica that holds its shard, with
// that grant's token.
func settled(ctx context.Context, ns string, shards int, live []*replica) (bool, string) {
	holder := map[int]string{}
	n := 0
	for _, r := range live {
		st := r.sh.State()
		if len(st.Held) < shards/len(live) || len(st.Held) > (shards+len(live)-1)/len(live) {
			return false, fmt.Sprintf("%s holds %d shards", r.id, len(st.Held))
		}
		for _, h := range st.Held {
			holder[h.Index] = fmt.Sprintf("%s/%d/%d", r.id, h.Index, h.Fence)
		}
		n += len(st.Held)
	}
	if n != shards {
		return false, fmt.Sprintf("%d of %d shards held", n, shards)
	}
	var cms corev1.ConfigMapList
	if err := k8s.List(ctx, &cms, client.InNamespace(ns)); err != nil {
		return false, err.Error()
	}
	for _, cm := range cms.Items {
		want := holder[mgrsharding.ShardOf(cm.Namespace, cm.Name, shards)]
		if got := cm.Annotations[owner]; got != want {
			return false, fmt.Sprintf("ConfigMap %s names %q, not its shard's holder %q", cm.Name, got, want)
		}
	}
	return true, ""
}

// Three replicas of an operator share 64 shards of ConfigMaps: each
// object is reconciled by the replica that holds its shard and by no
// other at the same time, while replicas join and leave and the objects
// change, and a replica that gains shards reconciles their objects with
// no change to them (Requeue). Idle, the replicas write nothing to the
// API server.
func TestReplicasReconcileEachObjectByItsShardsHolder(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	const shards = 64
	ref := shardedLock(t, "operator", s.Addr, shards)
	ns := namespace(t, "sharded-operator")
	ctx := context.Background()
	var names []string
	for i := range 40 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("cm-%02d", i)}}
		if err := k8s.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		names = append(names, cm.Name)
	}
	redistest.WaitUp(t, ttl, s) // the restart guard
	var led ledger
	a := startReplica(t, ref, ns, "a", &led, true)
	b := startReplica(t, ref, ns, "b", &led, true)
	var why string
	check := func(what string, live ...*replica) {
		t.Helper()
		ok := false
		waitFor(t, 60*time.Second, what, func() bool { ok, why = settled(ctx, ns, shards, live); return ok })
	}
	defer func() {
		if t.Failed() {
			t.Log("last:", why)
		}
	}()
	check("a and b to own every ConfigMap", a, b)

	// Half the objects change all along the joins and leaves below, so
	// that reconciles run while shards move; the other half change not,
	// so that only Requeue brings them to the replica that gains them.
	touch, stopTouching := context.WithCancel(ctx)
	touched := make(chan struct{})
	defer func() { stopTouching(); <-touched }()
	go func() {
		defer close(touched)
		for i := 0; touch.Err() == nil; i++ {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names[2*i%len(names)]}}
			patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"data":{"tick":"%d"}}`, i))
			if err := k8s.Patch(touch, cm, patch); err != nil && touch.Err() == nil {
				t.Errorf("touch %s: %v", cm.Name, err)
				return
			}
		}
	}()
	c := startReplica(t, ref, ns, "c", &led, true)
	check("c to take its share and own its ConfigMaps", a, b, c)
	b.stop()
	check("a and c to own b's ConfigMaps once b left", a, c)
	stopTouching()
	<-touched
	check("a and c to own every ConfigMap after the last change", a, c)

	entries := led.all()
	if f := led.faults(); len(f) > 0 {
		t.Fatalf("%d faults in %d reconciles, first: %s", len(f), len(entries), f[0])
	}
	for _, e := range entries {
		if e.shard.Index != mgrsharding.ShardOf(e.obj.Namespace, e.obj.Name, shards) {
			t.Fatalf("%s reconciled %s under shard %d; its shard is %d", e.replica, e.obj, e.shard.Index, mgrsharding.ShardOf(e.obj.Namespace, e.obj.Name, shards))
		}
	}
	t.Logf("%d reconciles, none of one object by two replicas at once", len(entries))

	// Idle, over three calls to Redis from each replica (three
	// renewIntervals) once the last touches' reconciles have run: no
	// reconcile, no API write.
	rc := s.Client()
	defer func() { _ = rc.Close() }()
	calls := func() int64 {
		c, err := redisstats.Read(ctx, rc)
		if err != nil {
			t.Fatal(err)
		}
		return c.Scripts()
	}
	reconciles := func() int {
		return len(led.all())
	}
	quiet := func(rounds int64) (int, int64) {
		n, w, from := reconciles(), writes.Load(), calls()
		waitFor(t, 30*time.Second, "calls from each replica", func() bool { return calls()-from >= 2*rounds })
		return reconciles() - n, writes.Load() - w
	}
	waitFor(t, 60*time.Second, "a renewInterval with no reconcile", func() bool { n, _ := quiet(1); return n == 0 })
	if n, w := quiet(3); n != 0 || w != 0 {
		t.Fatalf("idle, over three renewIntervals: %d reconciles and %d API writes; want none", n, w)
	}
}

// writes counts the replicas' mutating API requests.
var writes atomic.Int64

// counting counts the mutating requests of cfg in n.
func counting(cfg *rest.Config, n *atomic.Int64) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if !slices.Contains([]string{http.MethodGet, http.MethodHead}, req.Method) {
				n.Add(1)
			}
			return rt.RoundTrip(req)
		})
	})
	return c
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// A reconcile's writes pass while its shard is held and are refused,
// before they leave the process, once the shard's validity has lapsed
// (Redis paused past renewDeadline), even from a context that outlives
// the reconcile's; its context ends when the shard lapses; writes under
// no shard pass; and a request of a shard not held is dropped.
func TestGateRefusesAReconcilesWritesOnceItsShardLapsed(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	ref := shardedLock(t, "gated", s.Addr, 4)
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gated"}}
	if err := k8s.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, cm) })
	redistest.WaitUp(t, ttl, s)
	sh, err := mgrsharding.ForRedisLock(ctx, cfg, ref, "a")
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	run, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- sh.Start(run) }()
	defer func() {
		stop()
		if err := <-ran; err != nil {
			t.Error(err)
		}
	}()
	waitFor(t, 30*time.Second, "a to hold the 4 shards", func() bool { return len(sh.State().Held) == 4 })

	gated, err := client.New(sh.Gate(cfg), client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	annotate := func(ctx context.Context, v string) error {
		patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, owner, v))
		return gated.Patch(ctx, cm.DeepCopy(), patch)
	}
	entered, proceed, wrote := make(chan context.Context), make(chan struct{}), make(chan error)
	var (
		calls   atomic.Int32
		started atomic.Bool
		last    atomic.Value // the last try's outcome, for the failure
	)
	r := sh.Reconciler(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		calls.Add(1)
		if err := annotate(ctx, "held"); err != nil {
			return reconcile.Result{}, err
		}
		started.Store(true)
		entered <- ctx
		<-proceed
		wrote <- annotate(context.WithoutCancel(ctx), "lapsed")
		return reconcile.Result{}, nil
	}))
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "default", Name: "gated"}}
	// On a loaded machine a late renewal may let the shard lapse before
	// the first try, which is then dropped or has its write refused: try
	// again, as the work queue would, until one runs.
	giveUp := make(chan struct{})
	defer close(giveUp)
	go func() {
		for {
			_, err := r.Reconcile(ctx, req)
			if started.Load() {
				return
			}
			last.Store(fmt.Sprintf("%d calls of the reconciler, the last try's error %v, the shards held %v", calls.Load(), err, sh.State().Held))
			select {
			case <-time.After(100 * time.Millisecond):
			case <-giveUp:
				return
			}
		}
	}()
	var rctx context.Context
	select {
	case rctx = <-entered:
	case <-time.After(30 * time.Second):
		t.Fatalf("the reconcile did not start, or its write while the shard is held failed: %v", last.Load())
	}
	if got, ok := mgrsharding.FromContext(rctx); !ok || got.Index != mgrsharding.ShardOf("default", "gated", 4) {
		t.Fatalf("the reconcile's shard: %v %v; want shard %d", got, ok, mgrsharding.ShardOf("default", "gated", 4))
	}
	if err := mgrsharding.Valid(rctx); err != nil {
		t.Fatalf("Valid while the shard is held: %v", err)
	}
	if err := mgrsharding.Valid(ctx); !errors.Is(err, mgrsharding.ErrNotHeld) {
		t.Fatalf("Valid of a context that is no reconcile's: %v; want ErrNotHeld", err)
	}

	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = s.Resume()
		}
	}()
	waitFor(t, 30*time.Second, "the shards to lapse", func() bool { return len(sh.State().Held) == 0 })
	select {
	case <-rctx.Done():
		if !errors.Is(context.Cause(rctx), redislock.ErrLockLost) {
			t.Fatalf("the reconcile's context ended with %v; want ErrLockLost", context.Cause(rctx))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the reconcile's context did not end once its shard lapsed")
	}
	if err := mgrsharding.Valid(rctx); !errors.Is(err, mgrsharding.ErrNotHeld) {
		t.Fatalf("Valid once the shard lapsed: %v; want ErrNotHeld", err)
	}
	close(proceed)
	if err := <-wrote; !election.IsNotLeading(err) {
		t.Fatalf("a write after the shard lapsed: %v; want the gate's refusal", err)
	}
	var got corev1.ConfigMap
	if err := k8s.Get(ctx, req.NamespacedName, &got); err != nil || got.Annotations[owner] != "held" {
		t.Fatalf("the ConfigMap's annotation is %q (%v); want the write before the lapse, %q", got.Annotations[owner], err, "held")
	}
	if err := annotate(ctx, "unsharded"); err != nil {
		t.Fatalf("a write under no shard: %v; want it to pass", err)
	}
	before := calls.Load()
	if _, err := r.Reconcile(ctx, req); err != nil || calls.Load() != before {
		t.Fatalf("a request of a shard not held: error %v, %d calls of the reconciler; want it dropped", err, calls.Load()-before)
	}
	resumed = true
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "a to hold the 4 shards again", func() bool { return len(sh.State().Held) == 4 })
}

// A RedisLock without spec.shards is refused, naming the field.
func TestForRedisLockRefusesAnUnshardedLock(t *testing.T) {
	rl := &v1alpha1.RedisLock{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "single"},
		Spec:       v1alpha1.RedisLockSpec{Redis: &v1alpha1.RedisConnectionSpec{Mode: v1alpha1.ModeStandalone, Addrs: []string{"127.0.0.1:1"}}},
	}
	ctx := context.Background()
	if err := k8s.Create(ctx, rl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, rl) })
	_, err := mgrsharding.ForRedisLock(ctx, cfg, client.ObjectKeyFromObject(rl), "a")
	if !errors.Is(err, redisconn.ErrInvalidSpec) || !strings.Contains(err.Error(), "spec.shards") {
		t.Fatalf("ForRedisLock of a RedisLock without spec.shards: %v; want redisconn.ErrInvalidSpec naming spec.shards", err)
	}
}
