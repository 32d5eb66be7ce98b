package redislock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/pkg/redislock"
)

// Two applications sharing one Redis keep their locks apart with their own
// KeyPrefix, hash tag kept; a waiter under a prefix is woken by a release
// under it.
func TestKeyPrefixKeepsApplicationsApart(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			servers := redistest.StartN(t, m.nodes)
			app1 := clientWith(t, redislock.Options{AssumeDurable: true, Identity: "app1", KeyPrefix: "app1:"}, servers...)
			app1b := clientWith(t, redislock.Options{AssumeDurable: true, Identity: "app1b", KeyPrefix: "app1:"}, servers...)
			plain := newClient(t, "plain", servers...)
			ctx := context.Background()
			l1, err := app1.Obtain(ctx, "job", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := plain.Obtain(ctx, "job", time.Minute); err != nil {
				t.Fatalf("the same name under the default prefix: %v; want it free", err)
			}
			for i, s := range servers {
				if v, err := redislock.ParseValue(get(t, s, "app1:{job}")); err != nil || v.Identity != "app1" {
					t.Errorf("node %d: app1:{job} decodes to %+v, %v; want app1's lock", i, v, err)
				}
				if get(t, s, "app1:{job}:fence") == "" {
					t.Errorf("node %d: no app1:{job}:fence", i)
				}
			}
			waitCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			got := obtainWaitAsync(waitCtx, app1b, "job", time.Minute, nil)
			for _, s := range servers {
				c := s.Client()
				waitFor(t, 10*time.Second, "a subscriber under the prefix", func() bool {
					n, err := c.PubSubNumSub(ctx, "app1:{job}:events").Result()
					return err == nil && n["app1:{job}:events"] == 1
				})
				_ = c.Close()
			}
			if err := l1.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if r := <-got; r.err != nil {
				t.Fatalf("waiter under the prefix after the release: %v", r.err)
			}
			if h, err := plain.Inspect(ctx, "job"); err != nil || h.Identity != "plain" {
				t.Fatalf("default-prefix lock after app1's handover: %+v, %v; want plain's, untouched", h, err)
			}
		})
	}
}

// Metadata lives beside the holder: Inspect shows it to observers, an
// Elector publishes its own, holder repair puts it back with the key, and
// it goes with the release.
func TestMetadataIsReadableByObservers(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			servers := redistest.StartN(t, m.nodes)
			a, observer := newClient(t, "a", servers...), newClient(t, "observer", servers...)
			ctx := context.Background()
			l, err := a.ObtainWait(ctx, "meta", time.Minute, &redislock.ObtainOptions{Metadata: "addr=10.0.0.7:8080"})
			if err != nil {
				t.Fatal(err)
			}
			if l.Metadata() != "addr=10.0.0.7:8080" {
				t.Fatalf("Lock.Metadata %q", l.Metadata())
			}
			if h, err := observer.Inspect(ctx, "meta"); err != nil || h.Metadata != "addr=10.0.0.7:8080" || h.Identity != "a" {
				t.Fatalf("Inspect: %+v, %v; want a's metadata", h, err)
			}
			if m.nodes > 1 {
				c := servers[0].Client()
				if err := c.Del(ctx, lockKey("meta"), lockKey("meta")+":meta").Err(); err != nil {
					t.Fatal(err)
				}
				_ = c.Close()
				if err := l.Refresh(ctx); err != nil {
					t.Fatal(err)
				}
				if got := get(t, servers[0], lockKey("meta")+":meta"); got != "addr=10.0.0.7:8080" {
					t.Fatalf("node 0's metadata after holder repair: %q", got)
				}
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if h, err := observer.Inspect(ctx, "meta"); err != nil || h.Metadata != "" {
				t.Fatalf("Inspect after release: %+v, %v; want no metadata", h, err)
			}
			for i, s := range servers {
				if v := get(t, s, lockKey("meta")+":meta"); v != "" {
					t.Errorf("node %d keeps metadata %q after the release", i, v)
				}
			}

			e, err := a.NewElector(redislock.ElectorOptions{Name: "meta-elect", Metadata: "pod-a:9000", OnStartedLeading: func(context.Context, *redislock.Lock) {}})
			if err != nil {
				t.Fatal(err)
			}
			cand := start(e)
			defer cand.stop()
			waitFor(t, 10*time.Second, "the elector to lead", leading(e))
			if h, err := observer.Inspect(ctx, "meta-elect"); err != nil || h.Metadata != "pod-a:9000" {
				t.Fatalf("Inspect of an elector's lock: %+v, %v; want its metadata", h, err)
			}
		})
	}
}

// Lock.TTL reads what the nodes hold: the PTTL on one node, and with
// Redlock the time until fewer than a majority hold the key; a lock gone
// from a majority is lost.
func TestLockTTLReadsTheMajority(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			servers := redistest.StartN(t, m.nodes)
			c := newClient(t, "a", servers...)
			ctx := context.Background()
			l, err := c.Obtain(ctx, "ttl", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if d, err := l.TTL(ctx); err != nil || d <= 55*time.Second || d > time.Minute {
				t.Fatalf("TTL right after Obtain: %v, %v; want just under 1m", d, err)
			}
			// Shorten the keys by hand: node i keeps (i+1)*10s.
			for i, s := range servers {
				cl := s.Client()
				if err := cl.PExpire(ctx, lockKey("ttl"), time.Duration(i+1)*10*time.Second).Err(); err != nil {
					t.Fatal(err)
				}
				_ = cl.Close()
			}
			want := 10 * time.Second // one node: its own; three: the second longest of 10s, 20s, 30s is 20s
			if m.nodes == 3 {
				want = 20 * time.Second
			}
			if d, err := l.TTL(ctx); err != nil || d <= want-5*time.Second || d > want {
				t.Fatalf("TTL with shortened keys: %v, %v; want just under %v", d, err, want)
			}
			for _, s := range servers[:m.nodes/2+1] {
				cl := s.Client()
				if err := cl.Del(ctx, lockKey("ttl")).Err(); err != nil {
					t.Fatal(err)
				}
				_ = cl.Close()
			}
			if _, err := l.TTL(ctx); !errors.Is(err, redislock.ErrLockLost) || l.Valid() {
				t.Fatalf("TTL with the key gone from a majority: %v (valid %v); want ErrLockLost and invalid", err, l.Valid())
			}
		})
	}
}

// RefreshTTL renews with a new ttl that later renewals keep, and moves the
// local deadline (by the injected clock) to match, shorter or longer; a
// failed shortening still brings the deadline forward.
func TestRefreshTTLChangesTheTTL(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			servers := redistest.StartN(t, m.nodes)
			clk := testingclock.NewFakeClock(time.Now())
			c := clientWith(t, redislock.Options{AssumeDurable: true, Clock: clk}, servers...)
			ctx := context.Background()
			l, err := c.Obtain(ctx, "rettl", 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			drift := func(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }
			for _, ttl := range []time.Duration{time.Minute, 5 * time.Second} {
				clk.Step(time.Second)
				if err := l.RefreshTTL(ctx, ttl); err != nil {
					t.Fatal(err)
				}
				if got, want := l.Deadline(), clk.Now().Add(ttl-drift(ttl)); !got.Equal(want) {
					t.Fatalf("RefreshTTL(%v): deadline %v from now, want %v", ttl, got.Sub(clk.Now()), want.Sub(clk.Now()))
				}
				if err := l.Refresh(ctx); err != nil {
					t.Fatal(err)
				}
				// Redis never shortens a key: after the minute, the
				// keys keep it (S1 against a delayed renewal).
				for i, s := range servers {
					if d := pttl(t, s, lockKey("rettl")); d <= time.Minute-5*time.Second || d > time.Minute {
						t.Errorf("after RefreshTTL(%v) and a Refresh, node %d: PTTL %v, want the minute's", ttl, i, d)
					}
				}
			}
			for _, s := range servers {
				s.Kill()
			}
			clk.Step(time.Second)
			if err := l.RefreshTTL(ctx, 2*time.Second); !errors.Is(err, redislock.ErrNoQuorum) {
				t.Fatalf("RefreshTTL with Redis down: %v, want ErrNoQuorum", err)
			}
			if got, want := l.Deadline(), clk.Now().Add(2*time.Second-drift(2*time.Second)); !got.Equal(want) {
				t.Fatalf("deadline after a failed shortening: %v from now, want %v", got.Sub(clk.Now()), want.Sub(clk.Now()))
			}
			if err := l.RefreshTTL(ctx, 2500*time.Microsecond); !errors.Is(err, redislock.ErrInvalidOptions) {
				t.Fatalf("RefreshTTL with a ttl not in whole ms: %v, want ErrInvalidOptions", err)
			}
		})
	}
}

// One message per broken rule of the additions.
func TestAdditionsRejectInvalidOptions(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	c := newClient(t, "a", s)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		o    *redislock.ObtainOptions
		want string
	}{
		{"no step", &redislock.ObtainOptions{Retry: &wait.Backoff{Duration: time.Second}}, "Retry.Steps 0 allows no attempt"},
		{"no delay", &redislock.ObtainOptions{Retry: &wait.Backoff{Steps: 3}}, "Retry.Duration 0s is below 1ms"},
		{"cap below delay", &redislock.ObtainOptions{Retry: &wait.Backoff{Steps: 3, Duration: time.Second, Cap: time.Millisecond}}, "Retry.Cap 1ms is below Retry.Duration 1s"},
		{"shrinking", &redislock.ObtainOptions{Retry: &wait.Backoff{Steps: 3, Duration: time.Second, Factor: 0.5}}, "Retry.Factor 0.5 is below 1"},
		{"long metadata", &redislock.ObtainOptions{Metadata: strings.Repeat("x", redislock.MaxMetadataLen+1)}, "Metadata is 4097 bytes"},
	} {
		_, err := c.ObtainWait(ctx, "bad", time.Minute, tc.o)
		if !errors.Is(err, redislock.ErrInvalidOptions) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want ErrInvalidOptions saying %q", tc.name, err, tc.want)
		}
	}
	_, err := redislock.New(redistest.Clients(t, s), &redislock.Options{KeyPrefix: "app{1}:"})
	if !errors.Is(err, redislock.ErrInvalidOptions) || !strings.Contains(err.Error(), "KeyPrefix") {
		t.Errorf("KeyPrefix with braces: %v; want ErrInvalidOptions naming KeyPrefix", err)
	}
}
