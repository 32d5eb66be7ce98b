package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redislock/redislock/internal/testing/proc"
	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
)

// durations are an election's LeaseDuration (a RedisLock's ttl),
// RenewDeadline and RetryPeriod (a RedisLock's renewInterval).
type durations struct {
	lease, renew, retry time.Duration
}

// settle is how long a fleet is left alone after its last change before a
// trial. A standby that saw a new holder sleeps one jittered RetryPeriod
// (client-go's JitterUntil, factor 1.2: up to 2.2×RetryPeriod) before it
// blocks on the lock again; a replica started just before a trial wins with
// its immediate first attempt and fakes a fast handover. 2×RetryPeriod + 1s
// covers both.
func (d durations) settle() time.Duration { return 2*d.retry + time.Second }

// TestSampleOperatorFailover runs three replicas of the sample operator,
// kills the leader with SIGKILL, then stops the next one with SIGTERM, and
// times each handover: with a RedisLock, and with controller-runtime's
// Lease election as the baseline.
func TestSampleOperatorFailover(t *testing.T) {
	bin := goBuild(t, "./test/e2e/sampleoperator")
	d := durations{lease: 3 * time.Second, renew: 2 * time.Second, retry: 500 * time.Millisecond}

	t.Run("redis", func(t *testing.T) {
		_, ns, name := startRedisLock(t, d)
		f := newFleet(t, bin, redisArgs(ns, name))
		scenario(t, f, d, func(leader string) {
			waitHolder(t, ns, name, leader, 5*time.Second)
			// client-go's election events land on the RedisLock.
			waitUntil(t, 10*time.Second, "a LeaderElection event naming "+leader, func() bool {
				out, _ := kubectl(t, "get", "events", "-n", ns, "--field-selector", "involvedObject.name="+name, "-o", "jsonpath={.items[*].message}")
				return strings.Contains(out, leader+" became leader")
			})
		}, func(crash, graceful time.Duration) {
			if crash > d.lease+3*time.Second {
				t.Errorf("crash handover took %v, want at most ttl+3s = %v", crash, d.lease+3*time.Second)
			}
			if graceful >= time.Second {
				t.Errorf("graceful handover took %v, want < 1s (well below the ttl %v): the release should wake the standbys", graceful, d.lease)
			}
		})
	})

	t.Run("lease", func(t *testing.T) {
		ns := newNamespace(t)
		f := newFleet(t, bin, leaseArgs(ns, d))
		scenario(t, f, d, nil, nil)
	})
}

// scenario runs the three-replica crash-then-graceful scenario on f. after,
// if not nil, checks the new leader after the crash; check checks the two
// measured times.
func scenario(t *testing.T, f *fleet, d durations, after func(leader string), check func(crash, graceful time.Duration)) {
	for i := 1; i <= 3; i++ {
		f.start(fmt.Sprintf("replica-%d", i))
	}
	first := f.waitLeading(0, "", 20*time.Second)
	t.Logf("first leader: %s", first.id)
	f.waitStarted(3, 20*time.Second)
	f.settle(d.settle())

	within := d.lease + 3*d.retry + 5*time.Second // only to fail, not to judge
	crash, next := f.trial(syscall.SIGKILL, within)
	t.Logf("crash (SIGKILL %s): %s leads after %v", first.id, next.id, crash.Round(time.Millisecond))
	if after != nil {
		after(next.id)
	}
	f.settle(d.settle())

	graceful, last := f.trial(syscall.SIGTERM, within)
	t.Logf("graceful (SIGTERM %s): %s leads after %v", next.id, last.id, graceful.Round(time.Millisecond))
	if after != nil {
		after(last.id)
	}
	if check != nil {
		check(crash, graceful)
	}
	f.checkOneLeader()
}

// startRedisLock starts a redis-server and the redislock controller, and
// applies a RedisLock on it with timing d in a new namespace; it returns
// the server, the namespace and the RedisLock's name once the lock is
// Ready.
func startRedisLock(t *testing.T, d durations) (s *redisproc.Server, ns, name string) {
	t.Helper()
	s = redistest.Start(t, redisproc.Options{Password: "s3cret"})
	startController(t, nil)
	ns, name = newNamespace(t), "sample-leader"
	applyRedisLock(t, ns, name, s, "s3cret", d)
	return s, ns, name
}

// methodFleet returns a fleet of the sample operator that elects by
// method, "redis" (a RedisLock with timing d on a new Redis and
// controller) or "lease", and the namespace it elects in.
func methodFleet(t *testing.T, bin, method string, d durations) (*fleet, string) {
	t.Helper()
	if method == "redis" {
		_, ns, name := startRedisLock(t, d)
		return newFleet(t, bin, redisArgs(ns, name)), ns
	}
	ns := newNamespace(t)
	return newFleet(t, bin, leaseArgs(ns, d)), ns
}

func redisArgs(ns, name string) []string {
	return []string{"-election=redis", "-redislock=" + ns + "/" + name}
}

func leaseArgs(ns string, d durations) []string {
	return []string{"-election=lease", "-lease-namespace=" + ns, "-lease-id=sampleoperator",
		"-lease-duration=" + d.lease.String(), "-renew-deadline=" + d.renew.String(), "-retry-period=" + d.retry.String()}
}

// waitHolder waits until the RedisLock's .status.holderIdentity is want.
func waitHolder(t *testing.T, ns, name, want string, within time.Duration) {
	t.Helper()
	start := time.Now()
	var got string
	waitUntil(t, within, "holderIdentity "+want, func() bool {
		got, _ = kubectl(t, "get", "-n", ns, "redislock", name, "-o", "jsonpath={.status.holderIdentity}")
		return got == want
	})
	t.Logf("RedisLock %s/%s: .status.holderIdentity = %s after %v", ns, name, got, time.Since(start).Round(time.Millisecond))
}

// event is a line a replica printed, or its exit.
type event struct {
	kind string    // STARTED, LEADING, RECONCILING, RECONCILED, REFUSED or EXIT
	id   string    // the replica's identity
	at   time.Time // LEADING, RECONCILING: when printed; RECONCILED, REFUSED: when its write was sent or refused; else when the test read it
	seq  string    // RECONCILING, RECONCILED, REFUSED: the probe's seq
	err  error     // EXIT: what Wait returned
}

func (e event) String() string {
	s := fmt.Sprintf("%s %s %s", e.at.Format("15:04:05.000000"), e.kind, e.id)
	if e.seq != "" {
		s += " seq " + e.seq
	}
	if e.err != nil {
		s += " (" + e.err.Error() + ")"
	}
	return s
}

// replica is one sample operator process.
type replica struct {
	id       string
	p        *proc.Process
	signaled bool // the test sent it a signal (under fleet.mu)
	leading  bool // it printed LEADING (under fleet.mu)
}

// fleet runs the replicas of one election and journals their events.
type fleet struct {
	t    *testing.T
	bin  string
	args []string
	dir  string

	extra map[string][]string // more arguments for one replica (startWith)

	mu         sync.Mutex
	replicas   map[string]*replica
	journal    []event
	changed    chan struct{} // closed and replaced on each event
	overlaps   []string      // LEADING while another unsignaled replica led
	leader     string        // identity of the last LEADING
	lastChange time.Time     // when the last STARTED or LEADING line was read
}

func newFleet(t *testing.T, bin string, args []string) *fleet {
	f := &fleet{t: t, bin: bin, args: args, dir: t.TempDir(), extra: map[string][]string{}, replicas: map[string]*replica{}, changed: make(chan struct{})}
	t.Cleanup(f.stopAll)
	return f
}

// start starts replica id.
func (f *fleet) start(id string) {
	f.t.Helper()
	if err := f.launch(id); err != nil {
		f.t.Fatal(err)
	}
}

// startWith starts replica id with more arguments than the fleet's, which
// it keeps if relaunched.
func (f *fleet) startWith(id string, extra ...string) {
	f.t.Helper()
	f.mu.Lock()
	f.extra[id] = extra
	f.mu.Unlock()
	f.start(id)
}

// launch starts replica id, replacing any earlier replica of that name.
func (f *fleet) launch(id string) error {
	r := &replica{id: id}
	f.mu.Lock()
	args := append(append(append([]string{}, f.args...), f.extra[id]...), "-identity="+id)
	f.mu.Unlock()
	p, err := proc.Start(proc.Options{Name: id, Path: f.bin, Args: args,
		Env: []string{"KUBECONFIG=" + adminKubeconfig(f.t)}, Log: filepath.Join(f.dir, id+".log"), Stdout: func(line string) { f.line(r, line) }})
	if err != nil {
		return err
	}
	r.p = p
	f.mu.Lock()
	f.replicas[id] = r
	f.mu.Unlock()
	go func() {
		<-p.Done() // every line is read
		f.add(r, event{kind: "EXIT", id: id, at: time.Now(), err: p.Wait(context.Background())})
	}()
	return nil
}

// line records a line of r's stdout.
func (f *fleet) line(r *replica, line string) {
	now := time.Now()
	f.mu.Lock()
	f.lastChange = now
	f.mu.Unlock()
	fields := strings.Fields(line)
	switch {
	case len(fields) == 2 && fields[0] == "STARTED" && fields[1] == r.id:
		f.add(r, event{kind: "STARTED", id: r.id, at: now})
	case len(fields) == 3 && fields[0] == "LEADING" && fields[1] == r.id:
		nanos, err := strconv.ParseInt(fields[2], 10, 64)
		if err != nil {
			f.t.Errorf("%s printed a bad LEADING line %q", r.id, line)
			return
		}
		f.add(r, event{kind: "LEADING", id: r.id, at: time.Unix(0, nanos)})
	case len(fields) == 4 && (fields[0] == "RECONCILING" || fields[0] == "RECONCILED" || fields[0] == "REFUSED") && fields[1] == r.id:
		nanos, err := strconv.ParseInt(fields[3], 10, 64)
		if err != nil {
			f.t.Errorf("%s printed a bad %s line %q", r.id, fields[0], line)
			return
		}
		f.add(r, event{kind: fields[0], id: r.id, at: time.Unix(0, nanos), seq: fields[2]})
	default:
		f.t.Errorf("%s printed an unexpected line on stdout: %q", r.id, line)
	}
}

func (f *fleet) add(r *replica, e event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch e.kind {
	case "LEADING":
		for _, o := range f.replicas {
			if o != r && o.leading && !o.signaled && !o.p.Exited() {
				f.overlaps = append(f.overlaps, fmt.Sprintf("%s printed LEADING at %s while %s, never signaled, still led", r.id, e.at.Format("15:04:05.000000"), o.id))
			}
		}
		r.leading = true
		f.leader = r.id
	case "EXIT":
		r.leading = false
	}
	f.journal = append(f.journal, e)
	close(f.changed)
	f.changed = make(chan struct{})
}

// mark returns the journal's length, to wait for events after it.
func (f *fleet) mark() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.journal)
}

// waitEvent returns the first journal event from index from on that
// matches, failing the test after within.
func (f *fleet) waitEvent(from int, within time.Duration, what string, match func(event) bool) event {
	f.t.Helper()
	timeout := time.NewTimer(within)
	defer timeout.Stop()
	for {
		f.mu.Lock()
		for ; from < len(f.journal); from++ {
			if e := f.journal[from]; match(e) {
				f.mu.Unlock()
				return e
			}
		}
		changed := f.changed
		f.mu.Unlock()
		select {
		case <-changed:
		case <-timeout.C:
			f.t.Fatalf("timed out after %v waiting for %s; journal:\n%s", within, what, f.dump())
		}
	}
}

// waitLeading waits for a LEADING line, from index from on, by a replica
// other than not.
func (f *fleet) waitLeading(from int, not string, within time.Duration) event {
	f.t.Helper()
	return f.waitEvent(from, within, "a LEADING line from a replica other than "+strconv.Quote(not), func(e event) bool {
		return e.kind == "LEADING" && e.id != not
	})
}

// waitStarted waits until n replicas printed STARTED.
func (f *fleet) waitStarted(n int, within time.Duration) {
	f.t.Helper()
	seen := map[string]bool{}
	f.waitEvent(0, within, fmt.Sprintf("%d STARTED lines", n), func(e event) bool {
		if e.kind == "STARTED" {
			seen[e.id] = true
		}
		return len(seen) >= n
	})
}

// settle waits until d has passed since the last STARTED or LEADING line
// (a replica started, or the leader changed): the documented settle pause,
// the only bare sleep in these tests.
func (f *fleet) settle(d time.Duration) {
	f.mu.Lock()
	until := f.lastChange.Add(d)
	f.mu.Unlock()
	time.Sleep(time.Until(until))
}

// currentLeader returns the replica that printed the last LEADING line.
func (f *fleet) currentLeader() *replica {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.replicas[f.leader]
	if r == nil || !r.leading {
		f.t.Fatalf("no current leader; journal:\n%s", f.dumpLocked())
	}
	return r
}

// trial sends sig to the leader and returns how long it took until another
// replica printed LEADING, and that LEADING event. It waits for the old
// leader to exit.
func (f *fleet) trial(sig syscall.Signal, within time.Duration) (time.Duration, event) {
	f.t.Helper()
	old := f.currentLeader()
	from := f.mark()
	f.mu.Lock()
	old.signaled = true
	f.mu.Unlock()
	t0 := time.Now()
	if err := old.p.Signal(sig); err != nil {
		f.t.Fatalf("signal %v to %s: %v", sig, old.id, err)
	}
	next := f.waitLeading(from, old.id, within)
	select {
	case <-old.p.Done():
	case <-time.After(30 * time.Second):
		f.t.Fatalf("%s still running 30s after %v; journal:\n%s", old.id, sig, f.dump())
	}
	if sig == syscall.SIGTERM {
		exit := f.waitEvent(from, time.Second, "the EXIT of "+old.id, func(e event) bool { return e.kind == "EXIT" && e.id == old.id })
		if exit.err != nil {
			f.t.Errorf("%s exited with %v after SIGTERM; its log:\n%s", old.id, exit.err, f.log(old.id))
		}
	}
	return next.at.Sub(t0), next
}

// checkOneLeader fails the test if two replicas ever led at once.
func (f *fleet) checkOneLeader() {
	f.t.Helper()
	f.mu.Lock()
	overlaps := f.overlaps
	f.mu.Unlock()
	if len(overlaps) > 0 {
		f.t.Errorf("two leaders at once:\n%s\njournal:\n%s", strings.Join(overlaps, "\n"), f.dump())
	}
}

func (f *fleet) dump() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dumpLocked()
}

func (f *fleet) dumpLocked() string {
	var b strings.Builder
	for _, e := range f.journal {
		b.WriteString("  " + e.String() + "\n")
	}
	return b.String()
}

func (f *fleet) log(id string) string {
	f.mu.Lock()
	r := f.replicas[id]
	f.mu.Unlock()
	return r.p.LogTail(4096)
}

// stopAll kills every replica and waits for them; on failure it logs the
// journal and each replica's last log lines.
func (f *fleet) stopAll() {
	f.mu.Lock()
	rs := make([]*replica, 0, len(f.replicas))
	for _, r := range f.replicas {
		rs = append(rs, r)
	}
	f.mu.Unlock()
	for _, r := range rs {
		if err := r.p.Kill(); err != nil {
			f.t.Error(err)
		}
	}
	if f.t.Failed() {
		f.t.Logf("journal:\n%s", f.dump())
		for _, r := range rs {
			f.t.Logf("%s stderr (last 4KiB):\n%s", r.id, f.log(r.id))
		}
	}
}
