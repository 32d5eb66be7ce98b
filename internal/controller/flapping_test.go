package controller_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/internal/controller"
	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redisstats"
	"github.com/redislock/redislock/internal/testing/redistest"
)

// flapperCommands are the commands the tenant's loop sends: the rest of
// what the server executed, the controller sent (and the test's first
// INFO, which redisstats counts once).
var flapperCommands = map[string]bool{"multi": true, "incr": true, "set": true, "publish": true, "exec": true}

// A tenant's own Redis that shows a new, nearly expired holder at every
// look (her loop: a new fencing token, SET <lock> <new holder> PX 20, and
// a grant announced on the lock's channel, as fast as the server takes
// them) gets the RedisLock's status written, and Events recorded, at most
// once per renewInterval after a short burst (issue 40, attack 3); the
// controller's looks cost her Redis a bounded number of commands; and once
// the flapping stops, the last holder shows within two renewIntervals.
func TestAFlappingHolderIsShownAtMostOncePerRenewInterval(t *testing.T) {
	const (
		flap          = 5 * time.Second
		renewInterval = time.Second
	)
	s := redistest.Start(t, redisproc.Options{})
	ns := namespace(t)
	rl := redisLock(ns, "flap", v1alpha1.ModeStandalone, s.Addr)
	rl.Spec.TTL.Duration, rl.Spec.RenewInterval.Duration, rl.Spec.RenewDeadline.Duration = 3*time.Second, renewInterval, 2*time.Second
	create(t, rl)
	before := waitLock(t, rl, 10*time.Second, "Ready and free", func(got *v1alpha1.RedisLock) bool {
		return isCond(v1alpha1.ConditionReady, metav1.ConditionTrue, controller.ReasonReady)(got) &&
			isCond(v1alpha1.ConditionHeld, metav1.ConditionFalse, controller.ReasonFree)(got)
	})
	ctx := context.Background()
	rc := s.Client()
	defer func() { _ = rc.Close() }()
	lock := "redislock:{" + lockIn(ns) + "/flap}"
	// set makes identity the holder for ttl, as the tenant's loop does.
	set := func(i int, identity string, ttl time.Duration) error {
		_, err := rc.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Incr(ctx, lock+":fence")
			p.Set(ctx, lock, fmt.Sprintf("v1:%032x:%s", i, identity), ttl)
			p.Publish(ctx, lock+":events", "acquired")
			return nil
		})
		return err
	}
	key := client.ObjectKeyFromObject(rl)
	applies0 := countWrites(requests.reconciles(key), reqStatusApply)
	events0 := countEvents(t, ns, "flap", controller.EventLeaderChanged)
	window, err := redisstats.Begin(ctx, rc)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	sets := 0
	for time.Since(start) < flap {
		if err := set(sets, fmt.Sprintf("tenant-%d", sets), 20*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		sets++
	}
	if err := set(sets, "tenant-final", time.Minute); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	got := waitLock(t, rl, 2*renewInterval, "the final holder", func(got *v1alpha1.RedisLock) bool { return got.Status.HolderIdentity == "tenant-final" })
	lag := time.Since(stopped)
	elapsed := time.Since(start)
	counts, _, err := window.End(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Events go out in the order they were recorded: once the final
	// holder's is there, so are the others.
	waitFor(t, 5*time.Second, "the final holder's LeaderChanged event", func() (bool, any) {
		var list eventsv1.EventList
		if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == "flap" && e.Reason == controller.EventLeaderChanged && strings.HasSuffix(e.Note, `"tenant-final"`) {
				return true, e.Note
			}
		}
		return false, len(list.Items)
	})
	applies := countWrites(requests.reconciles(key), reqStatusApply) - applies0
	events := countEvents(t, ns, "flap", controller.EventLeaderChanged) - events0
	controllerCommands := int64(-1) // the test's INFO
	for cmd, n := range counts[0] {
		if !flapperCommands[cmd] {
			controllerCommands += n
		}
	}
	perSecond := func(n int64) float64 { return float64(n) / elapsed.Seconds() }
	t.Logf("over %v (%d holders set, %.0f/s): %d status applies (%.1f/s), %d LeaderChanged events (%.1f/s), %d controller commands to Redis (%.1f/s: %v), leaderTransitions %d -> %d; final holder shown %v after the flapping stopped",
		elapsed.Round(time.Millisecond), sets, perSecond(int64(sets)), applies, perSecond(int64(applies)), events, perSecond(int64(events)),
		controllerCommands, perSecond(controllerCommands), counts[0], before.Status.LeaderTransitions, got.Status.LeaderTransitions, lag.Round(time.Millisecond))
	// The floor: one status write and one event per renewInterval, after
	// a burst of three (a change, then a handover: a release and a grant).
	turns := math.Ceil(elapsed.Seconds() / renewInterval.Seconds())
	if limit := int(turns) + 3; applies > limit || events > limit {
		t.Fatalf("%d status applies and %d LeaderChanged events in %v; want at most %d of each (one per renewInterval %v, and a burst)", applies, events, elapsed, limit, renewInterval)
	}
	if got.Status.LeaderTransitions <= before.Status.LeaderTransitions {
		t.Fatalf("leaderTransitions %d after the flapping, %d before; want the transitions seen counted", got.Status.LeaderTransitions, before.Status.LeaderTransitions)
	}
	// A look is one inspect script (four reads inside it); the controller
	// looks at most four times per renewInterval after a burst of eight,
	// and reads the eviction policy once per resync.
	if limit := 5*(8+4*int64(turns)) + 10; controllerCommands > limit {
		t.Fatalf("the controller sent %d commands to Redis in %v (%v); want at most %d", controllerCommands, elapsed, counts[0], limit)
	}
	if holders := holderSeries(t, ns, "flap"); len(holders) != 1 || holders[0] != "tenant-final" {
		t.Fatalf("redislock_holder_info holders %v; want [tenant-final]", holders)
	}
}

// The floor throttles only a burst: a graceful handover (a release, then
// the next grant) right after another change, the first shown, is shown
// at once, not at the lock's next turn a renewInterval later.
func TestAHandoverRightAfterAChangeIsShownAtOnce(t *testing.T) {
	const renewInterval = 4 * time.Second
	s := redistest.Start(t, redisproc.Options{})
	ns := namespace(t)
	ctx := context.Background()
	name := lockIn(ns) + "/handover"
	a, err := holder(t, "pod-a", s).Obtain(ctx, name, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	rl := redisLock(ns, "handover", v1alpha1.ModeStandalone, s.Addr)
	rl.Spec.TTL.Duration, rl.Spec.RenewInterval.Duration, rl.Spec.RenewDeadline.Duration = 12*time.Second, renewInterval, 8*time.Second
	create(t, rl)
	waitLock(t, rl, 10*time.Second, "held by pod-a", func(got *v1alpha1.RedisLock) bool { return got.Status.HolderIdentity == "pod-a" })
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := holder(t, "pod-b", s).Obtain(ctx, name, time.Minute); err != nil {
		t.Fatal(err)
	}
	granted := time.Now()
	got := waitLock(t, rl, 2*renewInterval, "held by pod-b", func(got *v1alpha1.RedisLock) bool { return got.Status.HolderIdentity == "pod-b" })
	lag := time.Since(granted)
	t.Logf("pod-b shown %v after its grant", lag.Round(time.Millisecond))
	if lag > renewInterval/2 {
		t.Fatalf("pod-b shown %v after its grant; want well within the renewInterval %v: only a burst waits for a turn", lag, renewInterval)
	}
	if got.Status.LeaderTransitions != 1 {
		t.Fatalf("leaderTransitions %d after pod-a, then pod-b; want 1", got.Status.LeaderTransitions)
	}
}
