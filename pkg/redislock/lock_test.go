package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock/redislock/internal/testing/hostile"
	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/pkg/redislock"
	"k8s.io/apimachinery/pkg/util/wait"
)

func TestObtainStoresIdentityAndRefusesOthers(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	a, b := newClient(t, "pod-a", s), newClient(t, "pod-b", s)
	ctx := context.Background()

	l, err := a.Obtain(ctx, "job", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	v, err := redislock.ParseValue(get(t, s, lockKey("job")))
	if err != nil || v.Identity != "pod-a" {
		t.Fatalf("stored value decodes to %+v, %v; want identity pod-a", v, err)
	}
	if l.Fence() < time.Now().Add(-time.Minute).UnixMicro() || !l.Valid() {
		t.Fatalf("fence %d valid %v, want the server's clock in ms times 1000 and true", l.Fence(), l.Valid())
	}

	_, err = b.Obtain(ctx, "job", 10*time.Second)
	if !errors.Is(err, redislock.ErrNotObtained) || !strings.Contains(err.Error(), `"pod-a"`) {
		t.Fatalf("second Obtain: %v; want ErrNotObtained naming pod-a", err)
	}

	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if l.Valid() {
		t.Fatal("released lock still valid")
	}
	l2, err := b.Obtain(ctx, "job", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Fence() != l.Fence()+1 {
		t.Fatalf("fence after handover %d, want %d", l2.Fence(), l.Fence()+1)
	}
}

func TestMutualExclusionAcrossGoroutines(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	c := newClient(t, "many", s)
	var inside, maxInside, wins atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(time.Second)
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				l, err := c.Obtain(context.Background(), "mutex", 5*time.Second)
				if errors.Is(err, redislock.ErrNotObtained) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				n := inside.Add(1)
				for m := maxInside.Load(); n > m && !maxInside.CompareAndSwap(m, n); m = maxInside.Load() {
				}
				wins.Add(1)
				inside.Add(-1)
				if err := l.Release(context.Background()); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if maxInside.Load() != 1 || wins.Load() < 10 {
		t.Fatalf("at most %d holders at once over %d acquisitions; want exactly 1 over at least 10", maxInside.Load(), wins.Load())
	}
}

func TestLockExpiresAfterTTL(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	a, b := newClient(t, "a", s), newClient(t, "b", s)
	l, err := a.Obtain(context.Background(), "short", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if got := time.Until(l.Deadline()); got > 300*time.Millisecond-5*time.Millisecond {
		t.Fatalf("deadline %v ahead, want at most ttl less drift", got)
	}
	waitFor(t, 2*time.Second, "b to obtain the expired lock", func() bool {
		_, err := b.Obtain(context.Background(), "short", time.Second)
		return err == nil
	})
	if l.Valid() {
		t.Fatal("a still believes it holds an expired lock")
	}
}

func TestReleaseAfterExpiryLeavesNewHolder(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	a, b := newClient(t, "a", s), newClient(t, "b", s)
	ctx := context.Background()
	la, err := a.Obtain(ctx, "k", 150*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	var lb *redislock.Lock
	waitFor(t, 2*time.Second, "b to obtain", func() bool {
		lb, err = b.Obtain(ctx, "k", 10*time.Second)
		return err == nil
	})
	before := get(t, s, lockKey("k"))
	if err := la.Release(ctx); !errors.Is(err, redislock.ErrNotHeld) {
		t.Fatalf("stale release: %v, want ErrNotHeld", err)
	}
	if err := la.Refresh(ctx); !errors.Is(err, redislock.ErrLockLost) {
		t.Fatalf("stale refresh: %v, want ErrLockLost", err)
	}
	if after := get(t, s, lockKey("k")); after != before {
		t.Fatalf("stale release changed b's key from %q to %q", before, after)
	}
	if err := lb.Refresh(ctx); err != nil {
		t.Fatalf("b's lock after a's stale release: %v", err)
	}
}

func TestRefreshNeverRecreatesKey(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	c := newClient(t, "a", s)
	ctx := context.Background()
	l, err := c.Obtain(ctx, "gone", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rc := s.Client()
	defer func() { _ = rc.Close() }()
	rc.Del(ctx, lockKey("gone"))
	if err := l.Refresh(ctx); !errors.Is(err, redislock.ErrLockLost) {
		t.Fatalf("refresh of a deleted key: %v, want ErrLockLost", err)
	}
	if n := rc.Exists(ctx, lockKey("gone")).Val(); n != 0 {
		t.Fatal("refresh re-created the key")
	}
	if l.Valid() {
		t.Fatal("lost lock still valid")
	}
}

func TestGarbageInKeyIsReported(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	// The first call loads the script (EVAL), which a loaded machine may
	// not finish within newClient's 100ms.
	c := clientWith(t, redislock.Options{AssumeDurable: true, Identity: "a", NodeTimeout: 2 * time.Second}, s)
	set(t, s, lockKey("junk"), "not a lock value")
	_, err := c.Obtain(context.Background(), "junk", 5*time.Second)
	if !errors.Is(err, redislock.ErrNotObtained) || !errors.Is(err, redislock.ErrMalformedValue) {
		t.Fatalf("Obtain over garbage: %v; want ErrNotObtained and ErrMalformedValue", err)
	}
	if got := get(t, s, lockKey("junk")); got != "not a lock value" {
		t.Fatalf("garbage overwritten with %q", got)
	}
}

func TestInvalidInputIsRejected(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	one := redistest.Clients(t, s)
	c := newClient(t, "a", s)
	ctx := context.Background()
	cases := []struct {
		name string
		err  func() error
		want string
	}{
		{"no nodes", func() error { _, err := redislock.New(nil, nil); return err }, "no nodes"},
		{"even nodes", func() error { _, err := redislock.New(append(one, one[0]), nil); return err }, "odd number"},
		{"nil node", func() error { _, err := redislock.New([]redis.UniversalClient{nil}, nil); return err }, "node 0 is nil"},
		{"negative node timeout", func() error {
			_, err := redislock.New(one, &redislock.Options{NodeTimeout: -time.Second})
			return err
		}, "NodeTimeout -1s is negative"},
		{"node timeout over the maximum", func() error {
			_, err := redislock.New(one, &redislock.Options{NodeTimeout: redislock.MaxNodeTimeout + time.Millisecond})
			return err
		}, "NodeTimeout 5.001s is over the 5s maximum"},
		{"negative wait replicas", func() error {
			_, err := redislock.New(one, &redislock.Options{WaitReplicas: -2})
			return err
		}, "WaitReplicas -2 is negative, and not WaitAllReplicas (-1)"},
		{"wait for the replicas of a Ring", func() error {
			ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
			defer func() { _ = ring.Close() }()
			_, err := redislock.New([]redis.UniversalClient{ring}, &redislock.Options{WaitReplicas: redislock.WaitAllReplicas})
			return err
		}, "node 0: WaitReplicas needs a client of one server (redis.NewClient, redis.NewFailoverClient) or a Cluster's, not a *redis.Ring, whose pipelines go by key"},
		{"control character in identity", func() error {
			_, err := redislock.New(one, &redislock.Options{AssumeDurable: true, Identity: "a\nb"})
			return err
		}, "control character"},
		{"empty name", func() error { _, err := c.Obtain(ctx, "", time.Second); return err }, "lock name is empty"},
		{"brace in name", func() error { _, err := c.Obtain(ctx, "a{b", time.Second); return err }, "brace"},
		{"zero ttl", func() error { _, err := c.Obtain(ctx, "k", 0); return err }, "TTL 0s is not positive"},
		{"negative ttl", func() error { _, err := c.Obtain(ctx, "k", -time.Second); return err }, "not positive"},
		{"sub-millisecond ttl", func() error { _, err := c.Obtain(ctx, "k", time.Second+time.Microsecond); return err }, "whole number of milliseconds"},
		{"ttl not above node timeout", func() error { _, err := c.Obtain(ctx, "k", 50*time.Millisecond); return err }, "NodeTimeout 100ms is not shorter than TTL 50ms"},
		{"renew interval not below ttl", func() error {
			_, err := c.NewElector(redislock.ElectorOptions{Name: "k", Timing: redislock.Timing{TTL: time.Second, RenewInterval: time.Second}, OnStartedLeading: func(context.Context, *redislock.Lock) {}})
			return err
		}, "RenewInterval 1s is not shorter than TTL 1s"},
		{"renew deadline not below ttl", func() error {
			_, err := c.NewElector(redislock.ElectorOptions{Name: "k", Timing: redislock.Timing{TTL: time.Second, RenewDeadline: time.Second}, OnStartedLeading: func(context.Context, *redislock.Lock) {}})
			return err
		}, "RenewDeadline 1s is not shorter than TTL 1s less the drift allowance"},
		{"no leading callback", func() error { _, err := c.NewElector(redislock.ElectorOptions{Name: "k"}); return err }, "OnStartedLeading is nil"},
		{"negative step-down wait", func() error {
			_, err := c.NewElector(redislock.ElectorOptions{Name: "k", OnStartedLeading: func(context.Context, *redislock.Lock) {}, Health: redislock.NewHealth(nil, nil), StepDownAfter: -time.Second})
			return err
		}, "StepDownAfter -1s is negative"},
		{"step-down wait without health", func() error {
			_, err := c.NewElector(redislock.ElectorOptions{Name: "k", OnStartedLeading: func(context.Context, *redislock.Lock) {}, StepDownAfter: time.Second})
			return err
		}, "StepDownAfter is set without Health"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err()
			if !errors.Is(err, redislock.ErrInvalidOptions) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v; want ErrInvalidOptions saying %q", err, tc.want)
			}
		})
	}
}

func TestUnreachableRedisFailsWithinNodeTimeout(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	c := slowClient(t, s, false)
	ctx := context.Background()
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := c.Obtain(ctx, "k", 10*time.Second)
	if took := time.Since(start); !errors.Is(err, redislock.ErrNoQuorum) || took > 5*time.Second {
		t.Fatalf("Obtain on a paused Redis: %v after %v; want ErrNoQuorum, far sooner than the client's 1m timeout", err, took)
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	_, err = c.Obtain(ctx, "k", 10*time.Second)
	if !errors.Is(err, redislock.ErrNoQuorum) || !strings.Contains(err.Error(), s.Addr) {
		t.Fatalf("Obtain on a dead Redis: %v; want ErrNoQuorum naming %s", err, s.Addr)
	}
}

// slowClient returns a lock Client with a NodeTimeout of 100ms on s,
// through a go-redis client whose own timeouts are a minute (with
// ContextTimeoutEnabled as contextTimeout says), after one grant: a bound
// on a call must come from the lock, not from go-redis.
func slowClient(t *testing.T, s *redisproc.Server, contextTimeout bool) *redislock.Client {
	t.Helper()
	rc := redis.NewClient(&redis.Options{Addr: s.Addr, ReadTimeout: time.Minute, WriteTimeout: time.Minute, MaxRetries: -1, ContextTimeoutEnabled: contextTimeout})
	t.Cleanup(func() { _ = rc.Close() })
	c, err := redislock.New([]redis.UniversalClient{rc}, &redislock.Options{AssumeDurable: true, Identity: "a", NodeTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Obtain(context.Background(), "warm", time.Second); err != nil {
		t.Fatal(err)
	}
	return c
}

// Calls that overlap go through the node's autopipeliner, whose blocking
// face waits for its batch: on a server that stopped answering, for the
// connection's read timeout (a minute here) however short NodeTimeout is.
func TestOverlappingCallsOnAPausedRedisEndByNodeTimeout(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	c := slowClient(t, s, true)
	ctx := context.Background()
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	const callers = 8
	errs := make([]error, callers)
	took := make([]time.Duration, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			start := time.Now()
			_, errs[i] = c.Obtain(ctx, "paused-"+strconv.Itoa(i), 10*time.Second)
			took[i] = time.Since(start)
		})
	}
	wg.Wait()
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	for i := range callers {
		if !errors.Is(errs[i], redislock.ErrNoQuorum) || took[i] > 5*time.Second {
			t.Errorf("caller %d on a paused Redis: %v after %v; want ErrNoQuorum, far sooner than the client's 1m timeout", i, errs[i], took[i])
		}
	}
	// The abandoned calls leave the pipeline working once the server answers.
	for i := range callers {
		wg.Go(func() {
			err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
				_, errs[i] = c.Obtain(ctx, "resumed-"+strconv.Itoa(i), 10*time.Second)
				return errs[i] == nil, nil
			})
			if err != nil {
				t.Errorf("caller %d after the pause: no grant in 10s, last %v", i, errs[i])
			}
		})
	}
	wg.Wait()
}

func TestWrongPasswordIsReported(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{Password: "right"})
	rc := redis.NewClient(&redis.Options{Addr: s.Addr, Password: "wrong", ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rc.Close() })
	c, err := redislock.New([]redis.UniversalClient{rc}, &redislock.Options{AssumeDurable: true, Identity: "a"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Obtain(context.Background(), "k", time.Second)
	if !errors.Is(err, redislock.ErrNoQuorum) || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Fatalf("Obtain with a wrong password: %v; want ErrNoQuorum saying WRONGPASS", err)
	}
}

func TestInspectShowsHolderWithoutChangingIt(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	a, observer := newClient(t, "pod-a", s), newClient(t, "observer", s)
	ctx := context.Background()
	h, err := observer.Inspect(ctx, "watched")
	if err != nil || h.Identity != "" || h.Fence != 0 || h.FreeIn != 0 {
		t.Fatalf("free lock: %+v, %v", h, err)
	}
	l, err := a.Obtain(ctx, "watched", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	before := get(t, s, lockKey("watched"))
	h, err = observer.Inspect(ctx, "watched")
	if err != nil || h.Identity != "pod-a" || h.Fence != l.Fence() || h.FreeIn <= 9*time.Second || h.FreeIn > 10*time.Second {
		t.Fatalf("held lock: %+v, %v; want pod-a, fence %d, free in about 10s", h, err, l.Fence())
	}
	if len(h.Nodes) != 1 || h.Nodes[0].Err != nil {
		t.Fatalf("nodes %+v", h.Nodes)
	}
	if after := get(t, s, lockKey("watched")); after != before {
		t.Fatal("Inspect changed the key")
	}
	set(t, s, lockKey("watched"), "garbage")
	if _, err := observer.Inspect(ctx, "watched"); !errors.Is(err, redislock.ErrMalformedValue) {
		t.Fatalf("Inspect over garbage: %v, want ErrMalformedValue", err)
	}
	s.Kill()
	h, err = observer.Inspect(ctx, "watched")
	if !errors.Is(err, redislock.ErrNoQuorum) || h.Nodes[0].Err == nil {
		t.Fatalf("Inspect of a dead node: %+v, %v; want ErrNoQuorum and the node's error", h, err)
	}
}

func TestForceReleaseFreesAStuckLockAndWakesCandidates(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, redisproc.Options{})
	holder, admin, next := newClient(t, "stuck", s), newClient(t, "admin", s), newClient(t, "next", s)
	ctx := context.Background()
	const ttl = 2 * time.Second
	l, err := holder.Obtain(ctx, "stuck", ttl)
	if err != nil {
		t.Fatal(err)
	}
	wake, stop := next.WatchReleases(ctx, "stuck")
	defer stop()
	released := time.Now()
	r, err := admin.ForceRelease(ctx, "stuck", ttl)
	if err != nil || r.Identity != "stuck" || r.Released != 1 || r.Wait <= 0 || r.Wait > ttl {
		t.Fatalf("ForceRelease: %+v, %v; want it to report the holder, one node and a wait within the ttl", r, err)
	}
	select {
	case <-wake:
	case <-time.After(2 * time.Second):
		t.Fatal("the force-release woke no waiter")
	}
	// S1: nobody is granted the lock while the old holder may still
	// believe it holds it; the old holder learns of the loss at its
	// renewal.
	var guard *redislock.GuardedError
	if _, err := next.Obtain(ctx, "stuck", ttl); !errors.As(err, &guard) || !guard.KeyVanished {
		t.Fatalf("Obtain right after a force-release: %v; want a GuardedError for a vanished key", err)
	}
	if err := l.Refresh(ctx); !errors.Is(err, redislock.ErrLockLost) {
		t.Fatalf("holder's refresh after force release: %v, want ErrLockLost", err)
	}
	var nl *redislock.Lock
	waitFor(t, 2*ttl, "the lock to be granted after the old holder's time", func() bool {
		nl, err = next.Obtain(ctx, "stuck", ttl)
		return err == nil
	})
	if since := time.Since(released); since < r.Wait-10*time.Millisecond {
		t.Fatalf("granted %v after the force-release, before the old holder's time (%v) was up", since, r.Wait)
	}
	if nl.Fence() <= l.Fence() {
		t.Fatalf("next fence %d after %d", nl.Fence(), l.Fence())
	}
	if err := nl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Garbage is released too (held back for a ttl: it may be a holder
	// this version cannot read), and a free lock is a no-op.
	set(t, s, lockKey("stuck"), "garbage")
	if r, err := admin.ForceRelease(ctx, "stuck", ttl); err != nil || r.Wait < ttl-100*time.Millisecond {
		t.Fatalf("ForceRelease of garbage without an expiry: %+v, %v; want a wait of the ttl", r, err)
	}
	if got := get(t, s, lockKey("stuck")); got != "" {
		t.Fatalf("garbage left: %q", got)
	}
	if r, err := admin.ForceRelease(ctx, "stuck", ttl); err != nil || r.Identity != "" || r.Released != 0 {
		t.Fatalf("ForceRelease of a free lock: %+v, %v", r, err)
	}
}

// S1 inside Redis: a lock key that vanishes before its holder's time is up
// (an admin's DEL, an eviction under maxmemory) is not a free lock. Nobody
// is granted it until the validity the holder's last renewal recorded has
// passed; the holder learns of the loss at its renewal and steps down.
func TestVanishedKeyIsNotGrantedBeforeItsHolderTimeIsUp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		vanish func(t *testing.T, s *redisproc.Server, key string)
	}{
		{"DEL", func(t *testing.T, s *redisproc.Server, key string) {
			c := s.Client()
			defer func() { _ = c.Close() }()
			if err := c.Del(context.Background(), key).Err(); err != nil {
				t.Fatal(err)
			}
		}},
		{"eviction", func(t *testing.T, s *redisproc.Server, key string) {
			ctx := context.Background()
			c := s.Client()
			defer func() { _ = c.Close() }()
			used, err := c.Info(ctx, "memory").Result()
			if err != nil {
				t.Fatal(err)
			}
			var mem int64
			for line := range strings.Lines(used) {
				if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
					mem, _ = strconv.ParseInt(v, 10, 64)
				}
			}
			// volatile-ttl evicts the keys nearest their expiry first:
			// the lock's.
			for _, kv := range [][2]string{{"maxmemory-policy", "volatile-ttl"}, {"maxmemory", strconv.FormatInt(mem+512*1024, 10)}} {
				if err := c.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
					t.Fatal(err)
				}
			}
			payload := strings.Repeat("x", 4096)
			for i := 0; c.Exists(ctx, key).Val() == 1; i++ {
				if i > 10000 {
					t.Fatal("the lock key was never evicted")
				}
				_ = c.Set(ctx, fmt.Sprintf("filler:%d", i), payload, time.Hour).Err()
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := redistest.Start(t, redisproc.Options{})
			holder, next := newClient(t, "holder", s), newClient(t, "next", s)
			ctx := context.Background()
			const ttl = 2 * time.Second
			l, err := holder.Obtain(ctx, "vanish", ttl)
			if err != nil {
				t.Fatal(err)
			}
			tc.vanish(t, s, lockKey("vanish"))
			var guard *redislock.GuardedError
			if _, err := next.Obtain(ctx, "vanish", ttl); !errors.As(err, &guard) || !guard.KeyVanished || guard.Wait <= 0 || guard.Wait > ttl {
				t.Fatalf("Obtain after the key vanished: %v; want a GuardedError for a vanished key, within the ttl", err)
			}
			if err := l.Refresh(ctx); !errors.Is(err, redislock.ErrLockLost) {
				t.Fatalf("holder's renewal after its key vanished: %v, want ErrLockLost", err)
			}
			var nl *redislock.Lock
			waitFor(t, 2*ttl, "the lock to be granted once the holder's time is up", func() bool {
				nl, err = next.Obtain(ctx, "vanish", ttl)
				return err == nil
			})
			if !l.Deadline().IsZero() || nl.Fence() <= l.Fence() {
				t.Fatalf("old holder's deadline %v, fences %d then %d", l.Deadline(), l.Fence(), nl.Fence())
			}
		})
	}
}

// A subscription the server refused on reconnection (the password was
// changed, the connection killed, then the password cleared) comes back:
// releases wake waiters again, and the server lists the subscriber.
func TestReleasesWakeWaitersAgainAfterARefusedResubscription(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, redisproc.Options{})
	c := newClient(t, "waiter", s)
	ctx := context.Background()
	wake, stop := c.WatchReleases(ctx, "resub")
	defer stop()
	admin := s.Client()
	defer func() { _ = admin.Close() }()
	channel := redislock.EventsChannel("resub")
	for _, cmd := range [][]any{{"config", "set", "requirepass", "flip"}, {"auth", "flip"}, {"client", "kill", "type", "pubsub"}} {
		if err := admin.Do(ctx, cmd...).Err(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	// go-redis reconnects at once; its SUBSCRIBE is refused (-NOAUTH).
	waitFor(t, 5*time.Second, "the subscriber to reconnect unsubscribed", func() bool {
		n, err := admin.PubSubNumSub(ctx, channel).Result()
		return err == nil && n[channel] == 0
	})
	time.Sleep(time.Second) // the outage's length, not a wait for a condition
	if err := admin.ConfigSet(ctx, "requirepass", "").Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the subscription to come back", func() bool {
		n, err := admin.PubSubNumSub(ctx, channel).Result()
		return err == nil && n[channel] == 1
	})
	select { // drop a wake-up from before, if any
	case <-wake:
	default:
	}
	l, err := newClient(t, "holder", s).Obtain(ctx, "resub", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	case <-time.After(5 * time.Second):
		t.Fatal("a release after the subscription came back woke no waiter")
	}
}

// A server that runs no Lua scripts (Valkey 9.1 can be built without
// Lua; an ACL or rename can take EVAL away) fails each lock operation
// with ErrNoScripting, which says so, rather than a bare error reply.
func TestAServerWithoutScriptingIsNamed(t *testing.T) {
	s := hostile.Start(t, hostile.EachCommand(func(args []string) []byte {
		return []byte("-ERR unknown command '" + strings.ToLower(args[0]) + "', with args beginning with: \r\n")
	}))
	rc := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = rc.Close() })
	c, err := redislock.New([]redis.UniversalClient{rc}, &redislock.Options{AssumeDurable: true, NodeTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Obtain(context.Background(), "job", time.Minute)
	if !errors.Is(err, redislock.ErrNoScripting) || !errors.Is(err, redislock.ErrNoQuorum) {
		t.Fatalf("Obtain on a server without scripting: %v; want ErrNoQuorum wrapping ErrNoScripting", err)
	}
}
