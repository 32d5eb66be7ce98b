package election_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redisstats"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/pkg/election"
	"github.com/redislock/redislock/pkg/redislock"
)

// journal records, in order, when each candidate's Lock acquired the lock
// and when it gave it up (released or found it lost): the lock's own view,
// which client-go's leadership must sit inside.
type journal struct {
	mu     sync.Mutex
	events []string
}

func (j *journal) add(format string, args ...any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.events = append(j.events, fmt.Sprintf(format, args...))
}

// check fails t if a candidate acquired while another held the lock.
func (j *journal) check(t *testing.T) int {
	t.Helper()
	j.mu.Lock()
	defer j.mu.Unlock()
	holder, terms := "", 0
	for _, e := range j.events {
		var kind, who string
		if _, err := fmt.Sscanf(e, "%s %s", &kind, &who); err != nil {
			t.Fatal(err)
		}
		switch kind {
		case "acquired":
			if holder != "" {
				t.Fatalf("%s acquired while %s held the lock; journal:\n%v", who, holder, j.events)
			}
			holder = who
			terms++
		case "gave-up":
			if holder == who {
				holder = ""
			}
		}
	}
	return terms
}

// acquisitions counts the journaled acquisitions, without check's test of
// overlaps: a Lock that steps down releases inside Update, so its give-up
// is journaled after the release, and possibly after the next holder's
// acquisition.
func (j *journal) acquisitions() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	for _, e := range j.events {
		if strings.HasPrefix(e, "acquired ") {
			n++
		}
	}
	return n
}

// journaled wraps a Lock and journals acquisitions and give-ups: after a
// successful Create, and before a release or when an Update is refused. It
// also tracks the candidate's Get (gets).
type journaled struct {
	*election.Lock
	j    *journal
	gets *gets
}

// gets is what a candidate's Get calls are doing: whether one is in
// progress, and the holder the last one returned.
type gets struct {
	mu      sync.Mutex
	inGet   bool
	lastSaw string
}

// Get is the Lock's Get, tracked.
func (l journaled) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	l.gets.mu.Lock()
	l.gets.inGet = true
	l.gets.mu.Unlock()
	rec, raw, err := l.Lock.Get(ctx)
	l.gets.mu.Lock()
	defer l.gets.mu.Unlock()
	l.gets.inGet, l.gets.lastSaw = false, ""
	if err == nil {
		l.gets.lastSaw = rec.HolderIdentity
	}
	return rec, raw, err
}

// blockedOn reports whether the candidate sits in a Get after one that
// returned holder: the Lock blocks such a Get until holder's key is due
// to expire or a release message arrives, so the candidate notices a
// release at once, not at client-go's next retry.
func (g *gets) blockedOn(holder string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inGet && g.lastSaw == holder
}

func (l journaled) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := l.Lock.Create(ctx, ler)
	if err == nil {
		l.j.add("acquired %s", l.Identity())
	}
	return err
}

func (l journaled) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	if ler.HolderIdentity == "" {
		l.j.add("gave-up %s", l.Identity())
	}
	err := l.Lock.Update(ctx, ler)
	if apierrors.IsConflict(err) {
		l.j.add("gave-up %s", l.Identity())
	}
	return err
}

type candidate struct {
	id      string
	cancel  context.CancelFunc
	done    chan struct{}
	leading chan time.Time
	gets    *gets
}

// run starts client-go's LeaderElector for identity over a fresh Lock.
func run(t *testing.T, s *redisproc.Server, j *journal, id string, cfg leaderelection.LeaderElectionConfig, ttl time.Duration) *candidate {
	t.Helper()
	return runWith(t, s, j, id, cfg, ttl, election.LockOptions{})
}

// runWith is run with the Lock's options o (Wake set by runWith).
func runWith(t *testing.T, s *redisproc.Server, j *journal, id string, cfg leaderelection.LeaderElectionConfig, ttl time.Duration, o election.LockOptions) *candidate {
	t.Helper()
	lc, err := redislock.New(redistest.Clients(t, s), &redislock.Options{AssumeDurable: true, Identity: id})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	wake, stop := lc.WatchReleases(ctx, "election")
	o.Wake = wake
	lock, err := election.NewLock(lc, "election", ttl, o)
	if err != nil {
		t.Fatal(err)
	}
	c := &candidate{id: id, cancel: cancel, done: make(chan struct{}), leading: make(chan time.Time, 1), gets: &gets{}}
	cfg.Lock = journaled{lock, j, c.gets}
	cfg.Name = id
	cfg.Callbacks = leaderelection.LeaderCallbacks{
		OnStartedLeading: func(context.Context) { c.leading <- time.Now() },
		OnStoppedLeading: func() {},
	}
	le, err := leaderelection.NewLeaderElector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(c.done)
		defer stop()
		le.Run(ctx)
	}()
	return c
}

func (c *candidate) stop() {
	c.cancel()
	<-c.done
}

func config(lease, renew, retry time.Duration, release bool) leaderelection.LeaderElectionConfig {
	return leaderelection.LeaderElectionConfig{LeaseDuration: lease, RenewDeadline: renew, RetryPeriod: retry, ReleaseOnCancel: release}
}

// waitStandbys waits until every candidate but cs[leader] sits in a Get
// that blocks on cs[leader].
func waitStandbys(t *testing.T, cs []*candidate, leader int) {
	t.Helper()
	waitUntilNil(t, 10*time.Second, "the standbys to block on the leader", func() error {
		for i, c := range cs {
			if i != leader && !c.gets.blockedOn(cs[leader].id) {
				return fmt.Errorf("%s is not in a Get blocked on %s", c.id, cs[leader].id)
			}
		}
		return nil
	})
}

// waitLeader returns the first candidate to start leading after since.
func waitLeader(t *testing.T, cs []*candidate, timeout time.Duration) (int, time.Time) {
	t.Helper()
	leader, at := -1, time.Time{}
	err := wait.PollUntilContextTimeout(context.Background(), 2*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		for i, c := range cs {
			select {
			case at = <-c.leading:
				leader = i
				return true, nil
			default:
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no leader within %v", timeout)
	}
	return leader, at
}

func TestClientGoElectorsHandOverGracefullyOneAtATime(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	var j journal
	// A standby that did not wake on the release would wait for the key
	// to expire: up to the 4s ttl.
	cfg, ttl := config(4*time.Second, 3*time.Second, 500*time.Millisecond, true), 4*time.Second
	cs := make([]*candidate, 5)
	for i := range cs {
		cs[i] = run(t, s, &j, fmt.Sprintf("c%d", i), cfg, ttl)
	}
	defer func() {
		for _, c := range cs {
			c.stop()
		}
	}()
	leader, _ := waitLeader(t, cs, 10*time.Second)
	var handovers []time.Duration
	for round := 0; round < 8; round++ {
		// The standbys wait in a blocking Get, not in client-go's
		// sleep of up to RetryPeriod*(1+JitterFactor 1.2) between tries.
		waitStandbys(t, cs, leader)
		stopped := time.Now()
		cs[leader].stop()
		next, at := waitLeader(t, cs, 10*time.Second)
		handovers = append(handovers, at.Sub(stopped))
		cs[leader] = run(t, s, &j, cs[leader].id, cfg, ttl)
		leader = next
	}
	if terms := j.check(t); terms < 9 {
		t.Fatalf("%d acquisitions journaled, want at least 9", terms)
	}
	slices.Sort(handovers)
	t.Logf("graceful handover over %d rounds: median %v, max %v", len(handovers), handovers[len(handovers)/2], handovers[len(handovers)-1])
	if worst := handovers[len(handovers)-1]; worst > ttl/4 {
		t.Fatalf("slowest handover %v: standbys waited for expiry, not the release message", worst)
	}
}

func TestClientGoStandbyTakesOverAfterCrashAtExpiry(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	var j journal
	// ReleaseOnCancel off: stopping the leader leaves its key, as a crash.
	cfg, ttl := config(2*time.Second, 1500*time.Millisecond, 500*time.Millisecond, false), 2*time.Second
	first := run(t, s, &j, "first", cfg, ttl)
	waitLeader(t, []*candidate{first}, 5*time.Second)
	second := run(t, s, &j, "second", cfg, ttl)
	defer second.stop()
	waitStandbys(t, []*candidate{first, second}, 0)
	crashed := time.Now()
	first.stop()
	_, at := waitLeader(t, []*candidate{second}, 10*time.Second)
	took := at.Sub(crashed)
	t.Logf("failover after a crash: %v (lease %v)", took, cfg.LeaseDuration)
	// A leader that has not renewed for RenewDeadline steps down, so the
	// first's key was last renewed less than that before the crash and
	// lives LeaseDuration from then: a takeover sooner would break S1.
	if low, high := cfg.LeaseDuration-cfg.RenewDeadline, cfg.LeaseDuration+time.Second; took < low || took > high {
		t.Fatalf("failover took %v, want within [%v, %v]", took, low, high)
	}
}

func TestClientGoLeaderStepsDownWhenRedisIsDown(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	var j journal
	cfg, ttl := config(2*time.Second, 1500*time.Millisecond, 300*time.Millisecond, true), 2*time.Second
	c := run(t, s, &j, "only", cfg, ttl)
	waitLeader(t, []*candidate{c}, 5*time.Second)
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Resume() }()
	paused := time.Now()
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		t.Fatal("leader still running 10s after Redis went away")
	}
	// client-go's Run returns once renewals failed for RenewDeadline.
	if took := time.Since(paused); took > cfg.LeaseDuration+time.Second {
		t.Fatalf("leader stepped down %v after Redis went away; its key expires after %v", took, cfg.LeaseDuration)
	}
}

// health is a check a test turns on and off, counting its calls.
type health struct {
	ok    atomic.Bool
	calls atomic.Int64
}

func (h *health) check(context.Context) error {
	h.calls.Add(1)
	if h.ok.Load() {
		return nil
	}
	return errors.New("readiness failing")
}

// A leader whose health check fails for StepDownAfter releases at its next
// renewal, so the healthy standby leads well before the key would expire;
// and a candidate whose check fails never acquires.
func TestClientGoLeaderStepsDownWhenUnhealthy(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	var j journal
	const stepDownAfter = time.Second
	cfg, ttl := config(6*time.Second, 4*time.Second, 300*time.Millisecond, true), 6*time.Second
	opts := func(h *health) election.LockOptions {
		return election.LockOptions{Healthy: h.check, StepDownAfter: stepDownAfter}
	}
	var aHealth, bHealth health
	aHealth.ok.Store(true)
	bHealth.ok.Store(true)
	a := runWith(t, s, &j, "a", cfg, ttl, opts(&aHealth))
	defer func() { a.stop() }() // the a of the end: a restarts below
	waitLeader(t, []*candidate{a}, 10*time.Second)
	b := runWith(t, s, &j, "b", cfg, ttl, opts(&bHealth))
	defer b.stop()
	waitStandbys(t, []*candidate{a, b}, 0)

	unhealthy := time.Now()
	aHealth.ok.Store(false)
	_, at := waitLeader(t, []*candidate{b}, 10*time.Second)
	took := at.Sub(unhealthy)
	t.Logf("b led %v after a turned unhealthy (StepDownAfter %v, RetryPeriod %v)", took, stepDownAfter, cfg.RetryPeriod)
	// Not before a's checks failed for StepDownAfter; and by a release,
	// not at the key's expiry (a ttl after a's last renewal).
	if took < stepDownAfter || took > ttl-time.Second {
		t.Fatalf("b led %v after a turned unhealthy; want within [%v, %v]", took, stepDownAfter, ttl-time.Second)
	}
	// client-go's elector ends with its leadership: a restarts, as a
	// manager's process does, its app unhealthy still.
	a.stop()
	a = runWith(t, s, &j, "a", cfg, ttl, opts(&aHealth))
	waitStandbys(t, []*candidate{b, a}, 0)
	checks := aHealth.calls.Load()
	bHealth.ok.Store(false)
	// b steps down; a finds the lock free, checks, and does not acquire.
	waitUntilNil(t, 10*time.Second, "a's refused attempts", func() error {
		if n := aHealth.calls.Load() - checks; n < 3 {
			return fmt.Errorf("a checked its health %d times since b turned unhealthy", n)
		}
		return nil
	})
	if terms := j.acquisitions(); terms != 2 {
		t.Fatalf("%d acquisitions with both unhealthy; want 2 (a, b)", terms)
	}
	aHealth.ok.Store(true)
	waitLeader(t, []*candidate{a}, 10*time.Second)
	if terms := j.acquisitions(); terms != 3 {
		t.Fatalf("%d acquisitions; want 3 (a, b, a)", terms)
	}
}

// A candidate whose Admitted hook fails does not lead: Create returns the
// hook's error and gives the lock back, so another may take it at once.
func TestCreateGivesTheLockBackWhenNotAdmitted(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	errNotShown := errors.New("the API server does not show us")
	lc, err := redislock.New(redistest.Clients(t, s), &redislock.Options{AssumeDurable: true, Identity: "a"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := election.NewLock(lc, "admitted", 10*time.Second, election.LockOptions{Admitted: func(context.Context) error { return errNotShown }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := a.Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "a"}); !errors.Is(err, errNotShown) {
		t.Fatalf("Create: %v; want the hook's error", err)
	}
	if _, _, ok := a.Leading(); ok {
		t.Fatal("Leading after a Create that was not admitted")
	}
	b := newLock(t, []*redisproc.Server{s}, "admitted", "b")
	if err := b.Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "b"}); err != nil {
		t.Fatalf("b's Create after a's was not admitted: %v; want the lock free", err)
	}
}

func TestLockSemantics(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) { testLockSemantics(t, redistest.StartN(t, n)) })
	}
}

func testLockSemantics(t *testing.T, servers []*redisproc.Server) {
	ctx := context.Background()
	a, b := newLock(t, servers, "sem", "a"), newLock(t, servers, "sem", "b")
	if _, _, err := a.Get(ctx); !apierrors.IsNotFound(err) {
		t.Fatalf("Get of a free lock: %v, want NotFound", err)
	}
	rec := func(id string) resourcelock.LeaderElectionRecord {
		return resourcelock.LeaderElectionRecord{HolderIdentity: id, LeaseDurationSeconds: 10}
	}
	if err := a.Create(ctx, rec("a")); err != nil {
		t.Fatal(err)
	}
	if err := b.Create(ctx, rec("b")); !apierrors.IsConflict(err) {
		t.Fatalf("Create of a held lock: %v, want Conflict", err)
	}
	got, _, err := b.Get(ctx)
	if err != nil || got.HolderIdentity != "a" {
		t.Fatalf("Get: %+v, %v; want holder a", got, err)
	}
	// The same holder again: a Get whose ctx ends before a's key is due
	// (client-go's renew loop and release, bounded by RenewDeadline) gets
	// the record at once; one with time to spare waits for a change.
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	got, _, err = b.Get(short)
	cancel()
	if err != nil || got.HolderIdentity != "a" {
		t.Fatalf("Get with a ctx shorter than the holder's ttl: %+v, %v; want holder a at once", got, err)
	}
	long, cancel := context.WithCancel(ctx)
	time.AfterFunc(300*time.Millisecond, cancel)
	if _, _, err := b.Get(long); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get with no deadline, while a holds on: %v; want it to wait until cancelled", err)
	}
	if err := b.Update(ctx, rec("b")); !apierrors.IsConflict(err) {
		t.Fatalf("takeover Update of a held lock: %v, want Conflict", err)
	}
	// An admin frees the lock and b takes it: a's renewal is stale.
	admin, err := redislock.New(redistest.Clients(t, servers...), &redislock.Options{AssumeDurable: true, Identity: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	releasedAt := time.Now()
	released, err := admin.ForceRelease(ctx, "sem", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Until a's last renewal runs out, b is held back: no overlap.
	if err := b.Create(ctx, rec("b")); !apierrors.IsConflict(err) {
		t.Fatalf("Create right after a force-release: %v, want Conflict until the old holder's time is up (%v)", err, released.Wait)
	}
	if err := a.Update(ctx, rec("a")); !apierrors.IsConflict(err) {
		t.Fatalf("stale leader's Update: %v, want Conflict", err)
	}
	waitUntilNil(t, released.Wait+5*time.Second, "b's Create", func() error { return b.Create(ctx, rec("b")) })
	if since := time.Since(releasedAt); since < released.Wait-10*time.Millisecond {
		t.Fatalf("b granted %v after the force-release, before a's time (%v) was up", since, released.Wait)
	}
	if err := a.Update(ctx, rec("")); err != nil {
		t.Fatalf("stale leader's release: %v", err)
	}
	h, err := admin.Inspect(ctx, "sem")
	if err != nil || h.Identity != "b" {
		t.Fatalf("after a's stale writes the lock is %+v, %v; want held by b", h, err)
	}
	if err := b.Update(ctx, rec("")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Get(ctx); !apierrors.IsNotFound(err) {
		t.Fatalf("Get after release: %v, want NotFound", err)
	}
	if _, err := election.NewLock(admin, "sem", 0, election.LockOptions{}); !errors.Is(err, redislock.ErrInvalidOptions) {
		t.Fatalf("zero ttl: %v, want ErrInvalidOptions", err)
	}
}

// A holder's key without an expiry (a PERSIST by hand, a restore without
// its ttl) is freed only by a release: a standby's Get waits for that, a
// ttl at a time, and does not ask Redis in a loop.
func TestGetOfAKeyWithoutExpiryWaits(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	ctx := context.Background()
	a, b := newLock(t, []*redisproc.Server{s}, "persisted", "a"), newLock(t, []*redisproc.Server{s}, "persisted", "b")
	if err := a.Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "a", LeaseDurationSeconds: 10}); err != nil {
		t.Fatal(err)
	}
	c := s.Client()
	defer func() { _ = c.Close() }()
	if err := c.Persist(ctx, "redislock:{persisted}").Err(); err != nil {
		t.Fatal(err)
	}
	if got, _, err := b.Get(ctx); err != nil || got.HolderIdentity != "a" {
		t.Fatalf("Get: %+v, %v; want holder a", got, err)
	}
	before, err := redisstats.Read(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	long, cancel := context.WithCancel(ctx)
	time.AfterFunc(300*time.Millisecond, cancel)
	if _, _, err := b.Get(long); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get while a holds a key without expiry: %v; want it to wait until cancelled", err)
	}
	after, err := redisstats.Read(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	d := after.Sub(before)
	d["info"]-- // the first Read's own
	if n := d.Scripts(); n > 1 {
		t.Fatalf("a waiting Get ran %d scripts in 300ms (%v), want one look", n, d)
	}
}

// newLock is an election Lock called name, with a ttl of 10s, for
// candidate id, on servers.
func newLock(t *testing.T, servers []*redisproc.Server, name, id string) *election.Lock {
	t.Helper()
	lc, err := redislock.New(redistest.Clients(t, servers...), &redislock.Options{AssumeDurable: true, Identity: id})
	if err != nil {
		t.Fatal(err)
	}
	l, err := election.NewLock(lc, name, 10*time.Second, election.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// waitUntilNil calls f every 20ms until it returns nil, failing t after
// timeout with the last error.
func waitUntilNil(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		last = f()
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("%s: still %v after %v", what, last, timeout)
	}
}

// Leading decides by the injected clock against the held lock's local
// deadline: true up to the instant before it, false from it on, whatever
// Redis says (the key still lives there).
func TestLeadingEndsAtTheLockDeadlineOnTheInjectedClock(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	clk := testingclock.NewFakeClock(time.Unix(1_000_000, 0))
	lc, err := redislock.New(redistest.Clients(t, s), &redislock.Options{AssumeDurable: true, Identity: "a", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 10 * time.Second
	l, err := election.NewLock(lc, "leading", ttl, election.LockOptions{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := l.Leading(); ok {
		t.Fatal("Leading before Create")
	}
	start := clk.Now()
	if err := l.Create(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "a", LeaseDurationSeconds: 10}); err != nil {
		t.Fatal(err)
	}
	// The deadline is ttl less the drift allowance (1% + 2ms) from the
	// acquisition's start.
	valid := ttl - ttl/100 - 2*time.Millisecond
	clk.Step(valid - time.Nanosecond)
	fence, at, ok := l.Leading()
	if !ok || fence <= 0 || !at.Equal(start.Add(valid-time.Nanosecond)) {
		t.Fatalf("Leading 1ns before the deadline: fence %d, at %v after start, %v; want leading at the clock's reading", fence, at.Sub(start), ok)
	}
	clk.Step(time.Nanosecond)
	if _, at, ok := l.Leading(); ok || !at.Equal(start.Add(valid)) {
		t.Fatalf("Leading at the deadline: %v at %v after start; want not leading", ok, at.Sub(start))
	}
}
