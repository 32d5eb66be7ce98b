package controller_test

import (
	"context"
	"net"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/internal/controller"
	"github.com/redislock/redislock/internal/testing/hostile"
	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/internal/testing/testenv"
)

// startClassController runs, until t ends, a second controller that
// reconciles the RedisLocks labelled with class under policy, as
// `redislock controller -lock-class=<class>` with the policy's flags does.
func startClassController(t *testing.T, class string, policy controller.ConnectPolicy) {
	t.Helper()
	sel, err := controller.ClassSelector(class)
	if err != nil {
		t.Fatal(err)
	}
	scheme, err := testenv.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(apiConfig, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{&v1alpha1.RedisLock{}: {Label: sel, Transform: controller.StripManagedFields}}},
		// The suite's controller has the same name.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		t.Fatal(err)
	}
	r := &controller.RedisLockReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("redislock-controller"), Resync: resync, ClusterID: clusterID, ConnectPolicy: policy}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager of class %s: %v", class, err)
		}
	})
}

// classLock is redisLock labelled with class.
func classLock(class, ns, name string, mode v1alpha1.RedisMode, addrs ...string) *v1alpha1.RedisLock {
	rl := redisLock(ns, name, mode, addrs...)
	rl.Labels = map[string]string{v1alpha1.ClassLabel: class}
	return rl
}

// -allow-inline-redis=false: a lock with an inline spec.redis is not Ready,
// and its servers are never dialed; one that names a connection is served.
func TestForbidInlineRedisRefusesInlineLocksWithoutDialing(t *testing.T) {
	const class = "connections-only"
	startClassController(t, class, controller.ConnectPolicy{ForbidInlineRedis: true})
	ns := namespace(t)
	banner := hostile.Start(t, hostile.Banner([]byte("SSH-2.0-OpenSSH_9.6\r\n")))
	inline := classLock(class, ns, "inline", v1alpha1.ModeStandalone, banner.Addr)
	s := redistest.Start(t, redisproc.Options{})
	viaConnection := classLock(class, ns, "via-connection", "", "")
	viaConnection.Spec.Redis = nil
	viaConnection.Spec.ConnectionRef = &v1alpha1.ConnectionRef{Name: "main"}
	create(t, &v1alpha1.RedisConnection{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "main"}, Spec: v1alpha1.RedisConnectionSpec{Addrs: []string{s.Addr}}},
		inline, viaConnection)

	got := waitLock(t, inline, 10*time.Second, "Ready False, InlineRedisForbidden", isCond(v1alpha1.ConditionReady, metav1.ConditionFalse, controller.ReasonInlineRedisForbidden))
	if c := condition(got, v1alpha1.ConditionRedisReachable); c.Status != metav1.ConditionUnknown {
		t.Errorf("RedisReachable %s %s; want Unknown: Redis not contacted", c.Status, c.Reason)
	}
	waitEvent(t, ns, "inline", controller.EventInvalidSpec)
	waitLock(t, viaConnection, 10*time.Second, "the lock on a connection Ready", isCond(v1alpha1.ConditionReady, metav1.ConditionTrue, controller.ReasonReady))
	if n := banner.Accepted(); n != 0 {
		t.Errorf("the inline lock's server accepted %d connections; want none", n)
	}
}

// -redis-allowed-destinations: a lock whose server is outside the list
// shows DestinationNotAllowed, and its server sees no connection; one on a
// listed address works.
func TestAllowedDestinationsRefuseOthersWithAReason(t *testing.T) {
	const class = "destinations"
	dest, err := controller.ParseDestinations("127.0.0.2/32")
	if err != nil {
		t.Fatal(err)
	}
	startClassController(t, class, controller.ConnectPolicy{Destinations: dest})
	ns := namespace(t)
	s := redistest.Start(t, redisproc.Options{Args: []string{"--bind", "127.0.0.1", "127.0.0.2"}})
	_, port, err := net.SplitHostPort(s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	listed := classLock(class, ns, "listed", v1alpha1.ModeStandalone, net.JoinHostPort("127.0.0.2", port))
	banner := hostile.Start(t, hostile.Banner([]byte("SSH-2.0-OpenSSH_9.6\r\n")))
	outside := classLock(class, ns, "outside", v1alpha1.ModeStandalone, banner.Addr)
	create(t, listed, outside)

	waitLock(t, listed, 10*time.Second, "Ready on the listed address", isCond(v1alpha1.ConditionReady, metav1.ConditionTrue, controller.ReasonReady))
	got := waitLock(t, outside, 10*time.Second, "RedisReachable False, DestinationNotAllowed",
		isCond(v1alpha1.ConditionRedisReachable, metav1.ConditionFalse, controller.ReasonDestinationNotAllowed))
	if msg, want := condition(got, v1alpha1.ConditionRedisReachable).Message, banner.Addr+": "+controller.FaultMessage(controller.ReasonDestinationNotAllowed); msg != want {
		t.Errorf("message %q; want %q", msg, want)
	}
	waitEvent(t, ns, "outside", controller.EventRedisUnreachable)
	if n := banner.Accepted(); n != 0 {
		t.Errorf("the server outside the list accepted %d connections; want none", n)
	}
}
