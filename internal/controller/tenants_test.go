package controller_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/internal/controller"
	"github.com/redislock/redislock/internal/testing/hostile"
	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
)

// hostileLocks creates n RedisLocks in a new namespace on addr, each with
// its own nodeTimeout near the 5s maximum (so no two share a connection
// config, nor its breaker: each costs the controller its full
// nodeTimeouts), and deletes them when t ends.
func hostileLocks(t *testing.T, n int, addr string) string {
	t.Helper()
	ns := namespace(t)
	var g errgroup.Group
	g.SetLimit(8)
	for i := range n {
		g.Go(func() error {
			rl := redisLock(ns, fmt.Sprintf("hole-%d", i), v1alpha1.ModeStandalone, addr)
			rl.Spec.TTL = &v1alpha1.Duration{Duration: time.Minute}
			rl.Spec.RenewInterval, rl.Spec.RenewDeadline = nil, nil
			rl.Spec.Redis.NodeTimeout = &v1alpha1.Duration{Duration: 4*time.Second + time.Duration(i%1000)*time.Millisecond}
			return k8s.Create(context.Background(), rl)
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := k8s.DeleteAllOf(context.Background(), &v1alpha1.RedisLock{}, client.InNamespace(ns)); err != nil {
			t.Error(err)
		}
	})
	return ns
}

// A tenant's 1,000 locks on a server that accepts connections and never
// answers, each on a config of its own, hold at most all workers but one:
// another namespace's new lock is Ready in about a second (the goal
// is 2s; the deadline here leaves room for a loaded machine), and a lock on
// a healthy Redis still shows a new holder promptly. Without the fair
// queue the other namespace's lock waited behind the backlog: no status
// after 15s (measured; this test then fails).
func TestBlackHoleLocksOfOneNamespaceStarveNoOther(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	other := namespace(t)
	healthy := redisLock(other, "healthy", v1alpha1.ModeStandalone, s.Addr)
	create(t, healthy)
	name := waitLock(t, healthy, 10*time.Second, "Ready before the flood", isCond(v1alpha1.ConditionReady, metav1.ConditionTrue, controller.ReasonReady)).Status.LockName

	hole := hostile.Start(t, hostile.BlackHole)
	hostileLocks(t, 1000, hole.Addr)
	// The backlog holds workers: every worker the tenant may have is
	// dialling the black hole.
	waitFor(t, 60*time.Second, "the hostile locks hold workers", func() (bool, any) { return hole.Accepted() >= 3, hole.Accepted() })

	start := time.Now()
	fresh := redisLock(other, "fresh", v1alpha1.ModeStandalone, s.Addr)
	create(t, fresh)
	waitLock(t, fresh, 15*time.Second, "another namespace's new lock Ready during the flood", isCond(v1alpha1.ConditionReady, metav1.ConditionTrue, controller.ReasonReady))
	ready := time.Since(start)

	start = time.Now()
	lock, err := holder(t, "during-the-flood", s).Obtain(context.Background(), name, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lock.Release(context.Background()) })
	waitLock(t, healthy, 15*time.Second, "the healthy lock's new holder shown during the flood", func(rl *v1alpha1.RedisLock) bool {
		return rl.Status.HolderIdentity == "during-the-flood"
	})
	lag := time.Since(start)
	t.Logf("with 1000 black-hole locks in one namespace: another namespace's new lock Ready in %v; a healthy lock's new holder shown in %v; the black hole accepted %d connections",
		ready.Round(time.Millisecond), lag.Round(time.Millisecond), hole.Accepted())
}

// Many locks on one server that never answers share its breaker: after a
// couple of reconciles time out, the others are shown unreachable without
// dialling, and the server sees about one connection per breaker period,
// not one per lock per look.
func TestLocksOfOneSilentServerShareOneBreaker(t *testing.T) {
	hole := hostile.Start(t, hostile.BlackHole)
	ns := namespace(t)
	const n = 100
	locks := make([]*v1alpha1.RedisLock, n)
	for i := range locks {
		locks[i] = redisLock(ns, fmt.Sprintf("silent-%d", i), v1alpha1.ModeStandalone, hole.Addr)
		create(t, locks[i])
	}
	for _, rl := range locks {
		waitLock(t, rl, 60*time.Second, "shown unreachable", func(rl *v1alpha1.RedisLock) bool {
			return condition(rl, v1alpha1.ConditionRedisReachable).Status == metav1.ConditionFalse
		})
	}
	// Each lock is looked at again every 4 renewIntervals (800ms) while
	// unreachable, and a timed-out connection is dropped. Without a
	// breaker every look dials and waits out its own timeouts, 3 at a
	// time: silent-0 was looked at twice in 30s, not every 800ms. With
	// one, a dial or two per 5s breaker period. The window is 2 looks
	// per lock, counted over all of them: how fast the queue cycles
	// depends on the machine's load, and which lock it takes next on
	// the queue's order, neither on the breaker.
	before, looked := hole.Accepted(), requests.reconcilesIn(ns)
	start := time.Now()
	waitFor(t, 120*time.Second, "2 more looks per silent lock", func() (bool, any) {
		got := requests.reconcilesIn(ns) - looked
		return got >= 2*n, got
	})
	dials := hole.Accepted() - before
	elapsed := time.Since(start)
	// The lock client's one subscription per node reconnects on its own
	// backoff too: a few more.
	bound := 10 + 4*(1+int(elapsed/(5*time.Second)))
	t.Logf("%d locks on one silent server: %d dials in %v (bound %d)", n, dials, elapsed.Round(time.Millisecond), bound)
	if dials > bound {
		t.Fatalf("the silent server was dialled %d times in %v by %d locks; want at most %d: a breaker per connection", dials, elapsed, n, bound)
	}
}

// A server that answers every command with the header of a 100 GB string
// (or of anything over the limits) made the controller allocate it and
// die of out-of-memory, again after each restart. Now its lock shows
// ReplyTooLarge, the controller (this test process) lives on, and a lock
// beside it on a healthy Redis is Ready.
func TestAServerAnsweringAHugeLengthCrashesNothing(t *testing.T) {
	huge := hostile.Start(t, hostile.Reply([]byte("$100000000000\r\n")))
	ns := namespace(t)
	rl := redisLock(ns, "huge", v1alpha1.ModeStandalone, huge.Addr)
	create(t, rl)
	waitLock(t, rl, 30*time.Second, "shown as a reply too large", isCond(v1alpha1.ConditionRedisReachable, metav1.ConditionFalse, controller.ReasonReplyTooLarge))

	s := redistest.Start(t, redisproc.Options{})
	beside := redisLock(ns, "beside", v1alpha1.ModeStandalone, s.Addr)
	create(t, beside)
	waitLock(t, beside, 30*time.Second, "a lock beside it Ready", isCond(v1alpha1.ConditionReady, metav1.ConditionTrue, controller.ReasonReady))
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	t.Logf("the huge server accepted %d connections; the test process's heap is %d MiB", huge.Accepted(), m.HeapAlloc>>20)
	if m.HeapAlloc > 1<<30 {
		t.Fatalf("heap %d MiB after the huge server's replies", m.HeapAlloc>>20)
	}
}
