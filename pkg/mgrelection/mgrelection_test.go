package mgrelection_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/internal/testing/testenv"
	"github.com/redislock/redislock/pkg/election"
	"github.com/redislock/redislock/pkg/mgrelection"
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

// lockOn returns a RedisLock in default on addr, with edit applied, created
// through the API server.
func lockOn(t *testing.T, name, addr string, edit func(*v1alpha1.RedisLock)) types.NamespacedName {
	t.Helper()
	rl := &v1alpha1.RedisLock{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: v1alpha1.RedisLockSpec{
			Redis: &v1alpha1.RedisConnectionSpec{Mode: v1alpha1.ModeStandalone, Addrs: []string{addr}},
			TTL:   &v1alpha1.Duration{Duration: 4 * time.Second},
		},
	}
	if edit != nil {
		edit(rl)
	}
	if err := k8s.Create(context.Background(), rl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), rl) })
	return client.ObjectKeyFromObject(rl)
}

// ForRedisLock's errors tell their causes apart through this package's
// sentinels and API errors, with nothing of internal/ to import. (A
// RedisLock the engine would refuse, the API server refuses first; Redis
// is not reached before these checks.)
func TestForRedisLockErrorsWrapExportedSentinels(t *testing.T) {
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "not-pem"}, Data: map[string][]byte{"ca.crt": []byte("not a certificate")}}
	if err := k8s.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), secret) })
	for _, tc := range []struct {
		name string
		edit func(*v1alpha1.RedisLock)
		is   func(error) bool
		want string
	}{
		{"missing password Secret", func(rl *v1alpha1.RedisLock) {
			rl.Spec.Redis.PasswordSecretRef = &v1alpha1.SecretKeyRef{Name: "nowhere", Key: "password"}
		}, func(err error) bool { return errors.Is(err, mgrelection.ErrSecret) }, "ErrSecret"},
		{"CA that is no certificate", func(rl *v1alpha1.RedisLock) {
			rl.Spec.Redis.TLS = &v1alpha1.RedisTLS{CASecretRef: &v1alpha1.SecretKeyRef{Name: "not-pem", Key: "ca.crt"}}
		}, func(err error) bool { return errors.Is(err, mgrelection.ErrInvalidSpec) }, "ErrInvalidSpec"},
		{"missing connection", func(rl *v1alpha1.RedisLock) {
			rl.Spec.Redis, rl.Spec.ConnectionRef = nil, &v1alpha1.ConnectionRef{Name: "absent"}
		}, func(err error) bool { return errors.Is(err, mgrelection.ErrConnection) }, "ErrConnection"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := lockOn(t, "errs", "127.0.0.1:1", tc.edit)
			open, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			e, err := mgrelection.ForRedisLock(open, cfg, ref, "a")
			if err == nil {
				e.Close()
				t.Fatal("ForRedisLock succeeded")
			}
			if !tc.is(err) {
				t.Fatalf("ForRedisLock: %v; want it to wrap %s", err, tc.want)
			}
		})
	}
	_, err := mgrelection.ForRedisLock(ctx, cfg, types.NamespacedName{Namespace: "default", Name: "absent"}, "a")
	if !apierrors.IsNotFound(err) {
		t.Fatalf("ForRedisLock of a missing RedisLock: %v; want a NotFound API error", err)
	}
}

// A working RedisLock gives a Lock on its lock name and the manager
// options of its timing.
func TestForRedisLockSetsManagerOptions(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	ref := lockOn(t, "works", s.Addr, func(rl *v1alpha1.RedisLock) {
		rl.Spec.RenewInterval = &v1alpha1.Duration{Duration: 500 * time.Millisecond}
		rl.Spec.RenewDeadline = &v1alpha1.Duration{Duration: 3 * time.Second}
	})
	ctx := context.Background()
	c := s.Client()
	defer func() { _ = c.Close() }()
	// The restart guard holds every lock back for a ttl (4s) after the
	// server's start.
	redistest.WaitUp(t, 4*time.Second, s)
	clusterID, err := redisconn.ClusterID(ctx, k8s)
	if err != nil {
		t.Fatal(err)
	}
	// A RedisLock of scope Cluster (the default) is named in Redis with
	// the cluster's identity.
	key := "redislock:{" + clusterID + "/default/works}"
	e, err := mgrelection.ForRedisLock(ctx, cfg, ref, "a")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var o manager.Options
	e.Apply(&o)
	if !o.LeaderElection || o.LeaderElectionResourceLockInterface == nil || !o.LeaderElectionReleaseOnCancel ||
		*o.LeaseDuration != 4*time.Second || *o.RenewDeadline != 3*time.Second || *o.RetryPeriod != 500*time.Millisecond {
		t.Fatalf("options %+v; want leader election on the lock, released on cancel, 4s/3s/500ms", o)
	}
	if err := e.Lock.Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "a"}); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Get(ctx, key).Result(); err != nil || got[len(got)-2:] != ":a" {
		t.Fatalf("lock key %q, %v; want a's value under the RedisLock's default name", got, err)
	}
	if err := e.Lock.Update(ctx, resourcelock.LeaderElectionRecord{}); err != nil {
		t.Fatal(err)
	}
}

// WithHealth reaches the Lock: an unhealthy replica does not acquire; a
// leader whose checks keep failing steps down at a renewal, and its gate
// refuses writes from then on.
func TestWithHealthGatesTheLock(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	ref := lockOn(t, "healthy", s.Addr, nil)
	redistest.WaitUp(t, 4*time.Second, s) // the restart guard's ttl
	var healthy atomic.Bool
	errDown := errors.New("database unreachable")
	check := func(context.Context) error {
		if healthy.Load() {
			return nil
		}
		return errDown
	}
	ctx := context.Background()
	e, err := mgrelection.ForRedisLock(ctx, cfg, ref, "a", mgrelection.WithHealth(check, time.Nanosecond))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	rec := resourcelock.LeaderElectionRecord{HolderIdentity: "a"}
	if err := e.Lock.Create(ctx, rec); !errors.Is(err, redislock.ErrUnhealthy) || !errors.Is(err, errDown) {
		t.Fatalf("Create while unhealthy: %v; want ErrUnhealthy saying why", err)
	}
	healthy.Store(true)
	if err := e.Lock.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	gated, err := client.New(e.Lock.Gate(cfg), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "health-gated"}}
	if err := gated.Create(ctx, cm); err != nil {
		t.Fatalf("create while leading: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), cm) })
	healthy.Store(false)
	// The first failed check starts the count; the next, past
	// StepDownAfter, steps down.
	if err := e.Lock.Update(ctx, rec); err != nil {
		t.Fatalf("renewal at the first failed check: %v", err)
	}
	if err := e.Lock.Update(ctx, rec); !apierrors.IsConflict(err) || !errors.Is(err, redislock.ErrUnhealthy) {
		t.Fatalf("renewal after StepDownAfter unhealthy: %v; want a Conflict wrapping ErrUnhealthy", err)
	}
	if _, _, ok := e.Lock.Leading(); ok {
		t.Fatal("Leading after stepping down")
	}
	if err := gated.Delete(ctx, cm); !election.IsNotLeading(err) {
		t.Fatalf("delete after stepping down: %v; want the gate's refusal", err)
	}
}

// WithFencing with no controller to write the status: each acquisition
// reads the RedisLock a handful of times (backing off), then gives the
// lock back and fails, saying why.
func TestWithFencingReadsLittleAndGivesUpWithoutTheController(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	ref := lockOn(t, "unshown", s.Addr, nil) // renewInterval 533ms, of its 4s ttl
	redistest.WaitUp(t, 4*time.Second, s)    // the restart guard's ttl
	var reads atomic.Int64
	counted := rest.CopyConfig(cfg)
	counted.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/redislocks/unshown") {
				reads.Add(1)
			}
			return rt.RoundTrip(r)
		})
	}
	ctx := context.Background()
	e, err := mgrelection.ForRedisLock(ctx, counted, ref, "a", mgrelection.WithFencing())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	before := reads.Load()
	err = e.Lock.Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "a"})
	if !errors.Is(err, redisconn.ErrHolderNotShown) || !strings.Contains(err.Error(), "is the controller running?") {
		t.Fatalf("Create with no status to show it: %v; want it refused, saying why", err)
	}
	if n := reads.Load() - before; n < 2 || n > 8 {
		t.Fatalf("Create read the RedisLock %d times in its 533ms; want a few, backing off (at most 8)", n)
	}
	if _, _, ok := e.Lock.Leading(); ok {
		t.Fatal("Leading after a refused Create")
	}
}

// roundTripFunc is an http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The write gate on the real API server: while the Lock leads, writes
// pass; from the instant its deadline passes (on the injected clock,
// though Redis still holds the key), every write is refused before it is
// sent, and reads pass.
func TestGateRefusesWritesOnceTheDeadlinePasses(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	clk := testingclock.NewFakeClock(time.Unix(1_000_000, 0))
	lc, err := redislock.New(redistest.Clients(t, s), &redislock.Options{AssumeDurable: true, Identity: "a", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	lock, err := election.NewLock(lc, "gated", 10*time.Second, election.LockOptions{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	gated, err := client.New(lock.Gate(cfg), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cm := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
	}
	exists := func(name string) bool {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &corev1.ConfigMap{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	refused := func(what string, err error) {
		t.Helper()
		if !election.IsNotLeading(err) || !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "does not hold the lock") {
			t.Fatalf("%s: %v; want the gate's Conflict saying leadership is not held", what, err)
		}
	}
	refused("create before leading", gated.Create(ctx, cm("gate-early")))
	if exists("gate-early") {
		t.Fatal("a refused create reached the API server")
	}
	if err := lock.Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := gated.Create(ctx, cm("gate-leading")); err != nil {
		t.Fatalf("create while leading: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), cm("gate-leading")) })
	// The lock's local deadline: ttl less the drift allowance.
	clk.Step(10*time.Second - 100*time.Millisecond - 2*time.Millisecond)
	refused("create at the deadline", gated.Create(ctx, cm("gate-late")))
	refused("delete at the deadline", gated.Delete(ctx, cm("gate-leading")))
	if exists("gate-late") || !exists("gate-leading") {
		t.Fatal("a refused write reached the API server")
	}
	var list corev1.ConfigMapList
	if err := gated.List(ctx, &list, client.InNamespace("default")); err != nil {
		t.Fatalf("list after the deadline: %v; reads pass", err)
	}
	if err := gated.Get(ctx, client.ObjectKey{Namespace: "default", Name: "gate-leading"}, &corev1.ConfigMap{}); err != nil {
		t.Fatalf("get after the deadline: %v; reads pass", err)
	}
}

// BenchmarkGate compares a write with and without the gate, in 10
// interleaved rounds (each runs every variant once, so that drift in the
// machine's load cancels), and logs the median per-round ratio of gated to
// ungated time: "apiserver" is a dry-run create on the real API server,
// "roundtrip" the gate alone, in front of a transport that answers at once.
// Run: go test -run '^$' -bench Gate -benchtime 2000x -v ./pkg/mgrelection.
func BenchmarkGate(b *testing.B) {
	s := redistest.Start(b, redisproc.Options{})
	lc, err := redislock.New(redistest.Clients(b, s), &redislock.Options{AssumeDurable: true, Identity: "a"})
	if err != nil {
		b.Fatal(err)
	}
	lock, err := election.NewLock(lc, "bench", time.Hour, election.LockOptions{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := lock.Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "a"}); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = lock.Update(ctx, resourcelock.LeaderElectionRecord{}) }()
	write := map[bool]func() error{}
	roundTrip := map[bool]func() error{}
	for _, gated := range []bool{false, true} {
		c, rt := cfg, http.RoundTripper(answer{})
		if gated {
			c = lock.Gate(cfg)
			rt = lock.Gate(&rest.Config{}).WrapTransport(rt)
		}
		kc, err := client.New(c, client.Options{})
		if err != nil {
			b.Fatal(err)
		}
		write[gated] = func() error {
			return kc.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "bench"}}, client.DryRunAll)
		}
		roundTrip[gated] = func() error {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://x/api/v1/namespaces/default/configmaps", http.NoBody)
			if err == nil {
				_, err = rt.RoundTrip(req)
			}
			return err
		}
	}
	ratios, extra := map[string][]float64{}, map[string][]float64{}
	for round := range 10 {
		for _, v := range []struct {
			name string
			op   map[bool]func() error
		}{{"apiserver", write}, {"roundtrip", roundTrip}} {
			var perOp [2]float64
			for i, gated := range []bool{false, true} {
				b.Run(fmt.Sprintf("%s/gated=%v/round=%d", v.name, gated, round), func(b *testing.B) {
					for b.Loop() {
						if err := v.op[gated](); err != nil {
							b.Fatal(err)
						}
					}
					perOp[i] = float64(b.Elapsed()) / float64(b.N)
				})
			}
			ratios[v.name] = append(ratios[v.name], perOp[1]/perOp[0])
			extra[v.name] = append(extra[v.name], perOp[1]-perOp[0])
		}
	}
	for _, name := range []string{"apiserver", "roundtrip"} {
		r, d := ratios[name], extra[name]
		slices.Sort(r)
		slices.Sort(d)
		b.Logf("%-9s gated/ungated time per write: median %.3f (range %.3f-%.3f), gated minus ungated: median %.0f ns, over %d rounds", name, r[len(r)/2], r[0], r[len(r)-1], d[len(d)/2], len(r))
	}
}

// answer is a transport that answers 201 at once.
type answer struct{}

func (answer) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusCreated, Body: http.NoBody, Request: req}, nil
}
