package controller_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/internal/controller"
	"github.com/redislock/redislock/internal/testing/hostile"
	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/internal/testing/testenv"
	"github.com/redislock/redislock/pkg/redislock"
)

// runSharded runs a candidate called identity for the sharded lock name
// of shards shards until the returned stop is called, which gives its
// shards back.
func runSharded(t *testing.T, s *redisproc.Server, identity, name string, shards int, timing redislock.Timing) (stop func()) {
	t.Helper()
	c, err := holder(t, identity, s).NewSharded(redislock.ShardedOptions{Name: name, Shards: shards, Timing: timing, OnStarted: func(context.Context, redislock.Shard) {}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

func holders(rl *v1alpha1.RedisLock, want ...v1alpha1.ShardHolderStatus) bool {
	return slices.Equal(rl.Status.ShardHolders, want)
}

// A sharded RedisLock shows how many of its shards have a holder and who
// holds how many, follows the candidates as they come and go (their
// release and grant messages wake it), and says when shards have no
// holder, with an event.
func TestShardedLockShowsItsHolders(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	ns := namespace(t)
	// The RedisLock of docs/sharding.md, on this test's server and with a
	// short ttl.
	block, err := testenv.DocBlockByID("../..", "docs/sharding.md", "sharded-redislock")
	if err != nil {
		t.Fatal(err)
	}
	rl := &v1alpha1.RedisLock{}
	if err := yaml.UnmarshalStrict([]byte(block.Text), rl); err != nil {
		t.Fatal(err)
	}
	short := redisLock(ns, "fleet", v1alpha1.ModeStandalone, s.Addr)
	rl.Namespace, rl.Name, rl.Spec.Redis = ns, "fleet", short.Spec.Redis
	rl.Spec.TTL, rl.Spec.RenewInterval, rl.Spec.RenewDeadline = short.Spec.TTL, short.Spec.RenewInterval, short.Spec.RenewDeadline
	create(t, rl)
	n := int(*rl.Spec.Shards)
	half := int32(n / 2)
	timing := redislock.Timing{TTL: rl.Spec.TTL.Duration, RenewInterval: rl.Spec.RenewInterval.Duration, RenewDeadline: rl.Spec.RenewDeadline.Duration}
	name := lockIn(ns) + "/fleet"
	waitLock(t, rl, 10*time.Second, "no holder, unowned", func(got *v1alpha1.RedisLock) bool {
		return got.Status.ShardsHeld != nil && *got.Status.ShardsHeld == 0 && isCond(v1alpha1.ConditionShardsUnowned, metav1.ConditionTrue, controller.ReasonShardsUnowned)(got)
	})
	stopA := runSharded(t, s, "a", name, n, timing)
	stopB := runSharded(t, s, "b", name, n, timing)
	got := waitLock(t, rl, 10*time.Second, "a and b holding half the shards each", func(got *v1alpha1.RedisLock) bool {
		return int(*got.Status.ShardsHeld) == n && holders(got, v1alpha1.ShardHolderStatus{Identity: "a", Shards: half}, v1alpha1.ShardHolderStatus{Identity: "b", Shards: half}) &&
			isCond(v1alpha1.ConditionShardsUnowned, metav1.ConditionFalse, controller.ReasonShardsOwned)(got)
	})
	// Each shard was granted at least once since the look that saw none
	// held; none is unowned.
	waitFor(t, 10*time.Second, "the unowned gauge at 0", func() (bool, any) {
		u := shardMetric(t, "redislock_shards_unowned", ns, "fleet")
		return u == 0, u
	})
	grants := shardMetric(t, "redislock_observed_shard_grants_total", ns, "fleet")
	if grants < float64(n) {
		t.Errorf("%v shard grants counted once a and b hold the %d shards; want at least %d", grants, n, n)
	}
	if c, want := condition(got, v1alpha1.ConditionHeld), fmt.Sprintf("%d of %d shards held, by 2 candidates", n, n); c.Status != metav1.ConditionTrue || c.Message != want {
		t.Errorf("Held condition %+v; want True, %s", c, want)
	}
	if got.Status.HolderIdentity != "" {
		t.Errorf("holderIdentity %q for a sharded lock; want none", got.Status.HolderIdentity)
	}
	// A force-release does not apply: refused with the reason, the
	// annotation removed, the shards untouched.
	refused := countEvents(t, ns, "fleet", controller.EventForceReleaseRefused)
	got.Annotations = map[string]string{controller.ForceReleaseAnnotation: "ops"}
	if err := k8s.Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	waitLock(t, rl, 10*time.Second, "the annotation removed, every shard still held", func(got *v1alpha1.RedisLock) bool {
		_, annotated := got.Annotations[controller.ForceReleaseAnnotation]
		return !annotated && int(*got.Status.ShardsHeld) == n
	})
	waitFor(t, 10*time.Second, "a ForceReleaseRefused event", func() (bool, any) {
		n := countEvents(t, ns, "fleet", controller.EventForceReleaseRefused) - refused
		return n == 1, n
	})
	// a leaves: b takes its shards at once.
	stopA()
	waitLock(t, rl, 10*time.Second, "b holding them all", func(got *v1alpha1.RedisLock) bool {
		return int(*got.Status.ShardsHeld) == n && holders(got, v1alpha1.ShardHolderStatus{Identity: "b", Shards: int32(n)})
	})
	if g := shardMetric(t, "redislock_observed_shard_grants_total", ns, "fleet"); g < grants+float64(half) {
		t.Errorf("%v shard grants counted after a's %d shards moved to b; want at least %v", g, half, grants+float64(half))
	}
	// b leaves too: every shard is unowned, with one event.
	before := countEvents(t, ns, "fleet", controller.EventShardsUnowned)
	stopB()
	waitLock(t, rl, 10*time.Second, "no shard held, unowned", func(got *v1alpha1.RedisLock) bool {
		return *got.Status.ShardsHeld == 0 && len(got.Status.ShardHolders) == 0 && isCond(v1alpha1.ConditionShardsUnowned, metav1.ConditionTrue, controller.ReasonShardsUnowned)(got)
	})
	waitFor(t, 10*time.Second, "a ShardsUnowned event", func() (bool, any) {
		n := countEvents(t, ns, "fleet", controller.EventShardsUnowned) - before
		return n == 1, n
	})
	// A candidate that crashes (its connection closes) leaves its shards
	// to run out: no message wakes the controller, which looks again when
	// the earliest holder would run out.
	rc := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true})
	crasher, err := redislock.New([]redis.UniversalClient{rc}, &redislock.Options{Identity: "c", AssumeDurable: true})
	if err != nil {
		t.Fatal(err)
	}
	c, err := crasher.NewSharded(redislock.ShardedOptions{Name: name, Shards: n, Timing: timing, OnStarted: func(context.Context, redislock.Shard) {}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.Run(ctx) }()
	waitLock(t, rl, 10*time.Second, "c holding them all", func(got *v1alpha1.RedisLock) bool {
		return int(*got.Status.ShardsHeld) == n && holders(got, v1alpha1.ShardHolderStatus{Identity: "c", Shards: int32(n)})
	})
	crash := time.Now()
	_ = rc.Close()
	waitLock(t, rl, timing.TTL+10*time.Second, "c's shards shown unowned once they ran out", func(got *v1alpha1.RedisLock) bool {
		return *got.Status.ShardsHeld == 0 && isCond(v1alpha1.ConditionShardsUnowned, metav1.ConditionTrue, controller.ReasonShardsUnowned)(got)
	})
	t.Logf("c's crash shown %v after it, ttl %v", time.Since(crash).Round(time.Millisecond), timing.TTL)
	if u := shardMetric(t, "redislock_shards_unowned", ns, "fleet"); u != float64(n) {
		t.Errorf("the unowned gauge at %v once c's shards ran out; want %d", u, n)
	}
	if n := countEvents(t, ns, "fleet", controller.EventShardsUnowned) - before; n != 2 {
		t.Errorf("%d ShardsUnowned events; want 2, one per time the shards went unowned", n)
	}
	if n := countEvents(t, ns, "fleet", controller.EventLeaderChanged); n != 0 {
		t.Errorf("%d LeaderChanged events on a sharded lock; want none (its holders are status.shardHolders)", n)
	}
}

// shardMetric is the value of the series of metric for the RedisLock
// ns/name on the controller's registry; -1 when there is none.
func shardMetric(t *testing.T, metric, ns, name string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != metric {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] == ns && labels["name"] == name {
				return m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
	}
	return -1
}

// The spec's rules for shards, each named in the refusal.
func TestShardsSpecRules(t *testing.T) {
	ns := namespace(t)
	n := func(v int32) *int32 { return &v }
	for i, tc := range []struct {
		name string
		edit func(*v1alpha1.RedisLock)
		want string
	}{
		{"zero", func(rl *v1alpha1.RedisLock) { rl.Spec.Shards = n(0) }, "spec.shards: Invalid value"},
		{"too many", func(rl *v1alpha1.RedisLock) { rl.Spec.Shards = n(257) }, "spec.shards: Invalid value"},
		{"redlock", func(rl *v1alpha1.RedisLock) {
			rl.Spec.Shards = n(8)
			rl.Spec.Redis.Mode, rl.Spec.Redis.Addrs = v1alpha1.ModeRedlock, []string{"a:1", "b:1", "c:1"}
		}, "a sharded lock does not run in Redlock mode"},
		{"release", func(rl *v1alpha1.RedisLock) {
			rl.Spec.Shards, rl.Spec.DeletionPolicy = n(8), v1alpha1.DeletionRelease
		}, "a sharded lock has one per shard"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rl := redisLock(ns, "bad-shards-"+string(rune('a'+i)), v1alpha1.ModeStandalone, "redis:6379")
			tc.edit(rl)
			if err := k8s.Create(context.Background(), rl); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v; want a refusal saying %q", err, tc.want)
			}
		})
	}
	rl := redisLock(ns, "fixed", v1alpha1.ModeStandalone, "redis:6379")
	rl.Spec.Shards = n(8)
	create(t, rl)
	rl.Spec.Shards = n(16)
	if err := k8s.Update(context.Background(), rl); err == nil || !strings.Contains(err.Error(), "shards cannot be changed") {
		t.Fatalf("changing shards: %v; want a refusal saying shards cannot be changed", err)
	}
}

// A tenant's server that answers a sharded lock's inspection with what
// inspectshards.lua never gives costs that lock alone: it is shown not
// Ready, for the reason (NoQuorum for a reply of another shape,
// MalformedValue for a holder this project did not write), with none of
// the server's text; the controller asks it no more than once per
// renewInterval (no hot loop); a lock beside it on a healthy Redis is
// Ready.
func TestShardedLockOnAServerOfMalformedReplies(t *testing.T) {
	ns := namespace(t)
	for name, tc := range map[string]struct {
		reply, reason string
		ready         metav1.ConditionStatus
	}{
		// The control: the server speaks well enough for a reply of
		// inspectshards.lua's shape to be read.
		"well-formed":       {"*10\r\n:0\r\n$0\r\n\r\n:3\r\n:0\r\n$0\r\n\r\n:0\r\n:0\r\n$0\r\n\r\n:0\r\n:0\r\n", controller.ReasonReady, metav1.ConditionTrue},
		"negative-validity": {"*10\r\n:0\r\n$0\r\n\r\n:3\r\n:-900\r\n$0\r\n\r\n:0\r\n:0\r\n$0\r\n\r\n:0\r\n:0\r\n", controller.ReasonNoQuorum, metav1.ConditionFalse},
		"foreign-holder":    {"*10\r\n:0\r\n$9\r\nvault-pwd\r\n:3\r\n:900\r\n$0\r\n\r\n:0\r\n:0\r\n$0\r\n\r\n:0\r\n:0\r\n", controller.ReasonMalformedValue, metav1.ConditionFalse},
	} {
		var calls atomic.Int32
		s := hostile.Start(t, hostile.EachCommand(func(args []string) []byte {
			switch strings.ToLower(args[0]) {
			case "evalsha", "eval":
				calls.Add(1)
				return []byte(tc.reply)
			case "ping":
				return []byte("+PONG\r\n")
			}
			return []byte("-ERR not here\r\n")
		}))
		rl := redisLock(ns, name, v1alpha1.ModeStandalone, s.Addr)
		shards := int32(3)
		rl.Spec.Shards = &shards
		create(t, rl)
		got := waitLock(t, rl, 30*time.Second, name+" shown Ready "+string(tc.ready)+", "+tc.reason, isCond(v1alpha1.ConditionReady, tc.ready, tc.reason))
		if c := condition(got, v1alpha1.ConditionReady); strings.Contains(c.Message, "vault") || strings.Contains(c.Message, "900") {
			t.Errorf("%s: the Ready message repeats the server's reply: %q", name, c.Message)
		}
		if tc.ready == metav1.ConditionTrue {
			continue
		}
		n0, from := calls.Load(), time.Now()
		waitFor(t, 60*time.Second, name+": three more inspections", func() (bool, any) { n := calls.Load(); return n >= n0+3, n })
		if took, least := time.Since(from), 2*rl.Spec.RenewInterval.Duration; took < least {
			t.Errorf("%s: three inspections in %v; want them at most one per renewInterval (%v for three)", name, took, least)
		}
		t.Logf("%s: three more inspections took %v", name, time.Since(from).Round(time.Millisecond))
	}
	s := redistest.Start(t, redisproc.Options{})
	beside := redisLock(ns, "beside", v1alpha1.ModeStandalone, s.Addr)
	create(t, beside)
	waitLock(t, beside, 30*time.Second, "a lock beside them Ready", isCond(v1alpha1.ConditionReady, metav1.ConditionTrue, controller.ReasonReady))
}
