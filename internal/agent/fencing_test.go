package agent

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/internal/leaderhttp"
	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/internal/testing/testenv"
	"github.com/redislock/redislock/pkg/redisconn"
)

// A fenced agent (Options.Fencing) that holds the lock while nothing
// writes the RedisLock's status (no controller) does not lead, says why,
// and reads the RedisLock a handful of times and then once per
// renewInterval, or per fencingReadFloor when the tenant set a shorter
// one (1ms here: a thousand reads a second of the shared API server
// otherwise); once the status names its pod (as the controller writes
// it), it leads.
func TestFencedAgentLeadsOnceTheStatusShowsIt(t *testing.T) {
	for _, renew := range []*v1alpha1.Duration{nil, {Duration: time.Millisecond}} {
		t.Run(fmt.Sprintf("renewInterval %v", renew), func(t *testing.T) { testFencedAgent(t, renew) })
	}
}

func testFencedAgent(t *testing.T, renew *v1alpha1.Duration) {
	ctx := context.Background()
	srv := redistest.Start(t, redisproc.Options{})
	admin, err := testenv.Client(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "agent-fenced-"}}
	if err := admin.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	rl := &v1alpha1.RedisLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "lock"},
		Spec: v1alpha1.RedisLockSpec{Redis: &v1alpha1.RedisConnectionSpec{Addrs: []string{srv.Addr}}, TTL: &v1alpha1.Duration{Duration: 2 * time.Second}, RenewInterval: renew}}
	if err := admin.Create(ctx, rl); err != nil {
		t.Fatal(err)
	}
	renewInterval := max(redisconn.Timing(rl).RenewInterval, fencingReadFloor)
	var reads atomic.Int64
	cfg := rest.CopyConfig(restConfig)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/redislocks/lock") {
				reads.Add(1)
			}
			return rt.RoundTrip(r)
		})
	}
	answers, st := runAgent(t, cfg, Options{Lock: types.NamespacedName{Namespace: ns.Name, Name: "lock"}, Identity: "pod-a", ClusterID: "test-cluster", Fencing: true})
	// The fresh Redis's restart guard holds the lock back for its ttl.
	waitFor(t, 30*time.Second, "the agent to hold the lock and wait for admission", answers(func(st leaderhttp.Status) bool {
		return !st.Leading && strings.Contains(st.Error, "not admitted to lead")
	}))
	before := reads.Load() // the campaign's first read of the RedisLock, and the wait's
	waiting := time.Now()
	// Wait for at least three renewIntervals of reads at the cap.
	waitFor(t, 30*time.Second, "the wait's reads to reach the cap", func() bool { return time.Since(waiting) > 3*renewInterval+time.Second })
	if !answers(func(st leaderhttp.Status) bool { return !st.Leading })() {
		t.Fatalf("the agent leads with no status naming it: %+v", *st)
	}
	// 10ms doubling to renewInterval (at least fencingReadFloor): the
	// steps below it, then one per interval, and one more for the instant
	// the count was taken.
	steps := int64(math.Ceil(math.Log2(float64(renewInterval / (10 * time.Millisecond)))))
	bound := before + steps + int64(time.Since(waiting)/renewInterval) + 1
	if n := reads.Load(); n > bound {
		t.Errorf("the agent read the RedisLock %d times in %v of waiting (renewInterval %v); want at most %d", n, time.Since(waiting).Round(time.Millisecond), renewInterval, bound)
	}

	rl.Status.HolderIdentity = "pod-a"
	if err := admin.Status().Update(ctx, rl); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the agent to lead once the status names it", answers(func(st leaderhttp.Status) bool { return st.Leading && st.Error == "" }))
}

// runAgent runs an agent of o (Addr: a free loopback port) through cfg
// until t ends, and returns conditions for waitFor on its /leader answer,
// and the last answer read.
func runAgent(t *testing.T, cfg *rest.Config, o Options) (answers func(cond func(leaderhttp.Status) bool) func() bool, last *leaderhttp.Status) {
	t.Helper()
	o.Addr = "127.0.0.1:" + freePort(t)
	a, err := New(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- a.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-ran; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	last = &leaderhttp.Status{}
	answers = func(cond func(leaderhttp.Status) bool) func() bool {
		return func() bool {
			st, _, err := leaderhttp.Get(context.Background(), "http://"+o.Addr+"/leader")
			*last = st
			return err == nil && cond(st)
		}
	}
	return answers, last
}
