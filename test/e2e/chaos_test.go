package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/redislock/redislock/internal/leaderhttp"
	"github.com/redislock/redislock/internal/testing/proc"
	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/internal/testing/rung"
)

// TestChaos attacks one lock and its five candidates (three agents, two
// replicas of the sample operator with the plugin) with random faults for
// CHAOS_DURATION per Redis deployment (default 40s; longer runs: `make
// chaos`), against a single Redis, Redlock on five nodes, Sentinel (one
// master, two replicas, three Sentinels) and a Redis Cluster (three
// masters, a replica each). A checker outside the
// candidates samples every candidate's belief every 5ms and rebuilds their
// terms; it must find no overlap (S1), no fencing token that is not above
// every earlier one (S3), and a leader back within a bound after each
// fault (L1). CHAOS_SEED replays a run.
func TestChaos(t *testing.T) {
	// With the other parallel tests, after the sequential ones: in make
	// test, once the integration rung beside them has ended (its CPU load
	// and two deployments' proxies in this one process left a Redlock's
	// 200ms node timeouts unmet for 16s).
	rung.NeedServers(t) // before its binaries are built
	t.Parallel()
	window, seed := chaosSettings(t)
	bins := chaosBinaries{redislock: goBuild(t, "."), operator: goBuild(t, "./test/e2e/sampleoperator")}
	// The deployments run side by side (as many at once as -parallel
	// allows: two on 2 cores), each in a namespace of its own with a
	// controller that watches only that one; the summary is logged once
	// they have all ended.
	deployments := []func(*testing.T, *chaosRun) chaosBackend{singleBackend, redlockBackend, sentinelBackend, clusterBackend}
	rows := make([]string, len(deployments))
	t.Cleanup(func() { logChaosSummary(t, rows) })
	for i, deployment := range deployments {
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		name := []string{"single", "redlock5", "sentinel", "cluster"}[i]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rows[i] = runChaos(t, name, deployment, bins, window, rng)
		})
	}
}

// logChaosSummary logs a row per deployment that ran.
// chaosSettings reads CHAOS_DURATION (default 40s), the window of faults
// per deployment, and CHAOS_SEED (default the clock), which replays a
// run, and logs both.
func chaosSettings(t *testing.T) (window time.Duration, seed uint64) {
	window = 40 * time.Second
	if v := os.Getenv("CHAOS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("CHAOS_DURATION=%q: %v", v, err)
		}
		window = d
	}
	seed = uint64(time.Now().UnixNano())
	if v := os.Getenv("CHAOS_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q: %v", v, err)
		}
		seed = n
	}
	t.Logf("CHAOS_SEED=%d CHAOS_DURATION=%v", seed, window)
	return window, seed
}

func logChaosSummary(t *testing.T, rows []string) {
	rows = slices.DeleteFunc(rows, func(r string) bool { return r == "" })
	t.Logf("chaos summary (ttl %v; scripts/s: the busiest node, idle for %v and under faults; fence: median growth per leadership change; writes: RedisLock status writes a minute under faults):\n%-9s %6s %8s %6s %12s %15s %11s %11s %7s %9s  %s\n%s",
		faultTiming.lease, chaosIdleWindow,
		"backend", "faults", "answers", "terms", "S1 overlaps", "S3 regressions", "scripts/s", "(faults)", "fence+", "writes/m", "L1: longest time with no leader after a fault, by kind",
		strings.Join(rows, "\n"))
}

// chaosBinaries are the candidates' programs: the redislock binary (its
// agent), the sample operator (the plugin) and, for TestShardedChaos, the
// sharded operator example.
type chaosBinaries struct{ redislock, operator, sharded string }

// chaosBackend is one Redis deployment under attack.
type chaosBackend struct {
	// spec is the RedisLock's spec.redis, as YAML.
	spec string
	// faults are the faults this deployment can suffer besides those of
	// every run (kill, stop, and, with proxies, cut and delay).
	faults map[string]func(rng *rand.Rand) string
	// proxies carry every candidate's traffic to Redis, when they can.
	proxies []*chaosProxy
	// nodes are the Redis servers, for counting what they execute.
	nodes []*redisproc.Server
	// redlock says the nodes are independent Redlock nodes (not one
	// deployment's master and replicas).
	redlock bool
	// client reaches the deployment as the candidates do (its master),
	// not through the proxies; nil for Redlock.
	client redis.UniversalClient
}

// chaosRun is one backend's run: its candidates and what happened.
type chaosRun struct {
	t        *testing.T
	bins     chaosBinaries
	ns       string
	dir      string
	mu       sync.Mutex
	procs    map[string]*chaosCandidate
	journal  []journalEntry
	stopping bool
	// reconciles are the sharded operator's "reconciled" log lines.
	reconciles []logged
	// retired are the candidates not to restart when they exit.
	retired map[string]bool
}

// chaosCandidate is one candidate process.
type chaosCandidate struct {
	id, kind, addr string
	*proc.Process
}

// journalEntry is a candidate's own record that it began to lead.
type journalEntry struct {
	id    string
	at    time.Time
	fence int64 // 0 when the record does not say
}

// chaosFault is one fault the run injected.
type chaosFault struct {
	kind, target string
	at, end      time.Time
}

func runChaos(t *testing.T, name string, deployment func(*testing.T, *chaosRun) chaosBackend, bins chaosBinaries, window time.Duration, rng *rand.Rand) string {
	r := &chaosRun{t: t, bins: bins, ns: newNamespace(t), dir: t.TempDir(), procs: map[string]*chaosCandidate{}}
	b := deployment(t, r)
	manifest := fmt.Sprintf("apiVersion: redislock.io/v1alpha1\nkind: RedisLock\nmetadata:\n  name: chaos\nspec:\n  ttl: %s\n  renewDeadline: %s\n  renewInterval: %s\n  redis:\n%s",
		faultTiming.lease, faultTiming.renew, faultTiming.retry, b.spec)
	if out, err := kubectlIn(t, manifest, "apply", "-n", r.ns, "-f", "-"); err != nil {
		t.Fatalf("apply RedisLock: %v\n%s", err, out)
	}
	// The controller shows the holder in the status: its status writes
	// are counted, and its Inspects are part of what Redis serves.
	startController(t, nil, "-watch-namespaces="+r.ns)
	// Two of the agents run a command only while leading (the kind
	// "cmd"), which journals its life: it must never run on two at once.
	r.start("agent-0", "agent", freeAddr(t))
	for i := 1; i < 3; i++ {
		r.start(fmt.Sprintf("agent-cmd-%d", i), "cmd", freeAddr(t))
	}
	for i := range 2 {
		r.start(fmt.Sprintf("plugin-%d", i), "plugin", freeAddr(t))
	}
	t.Cleanup(r.stopAll)
	p := startPoller(r)
	t.Cleanup(p.stop)
	ttl := faultTiming.lease
	// The first leader: five processes starting, each dialling every
	// node. Beside the integration rung and two busy loops, a Redlock's
	// 200ms node timeouts went unmet for 16s of it (no fault yet, so no
	// L1 bound): a minute.
	waitChaosLeader(t, p, time.Minute)
	pause(ttl) // the standbys' first attempts after the start race
	idle := r.measureCost(b.nodes, func() int {
		terms := len(r.journalCopy())
		pause(chaosIdleWindow) // the counting window, not a wait for a condition
		return len(r.journalCopy()) - terms
	})
	if idle.changes != 0 || idle.writesPerMinute != 0 {
		t.Errorf("E1: with a stable leader for %v: %d leadership changes and %.1f status writes a minute; want none", idle.took.Round(time.Second), idle.changes, idle.writesPerMinute)
	}
	idle.check(t, "idle", 0)

	faults := map[string]func(rng *rand.Rand) string{
		"kill": r.killAndRestart,
		"stop": r.stopPastTTL,
	}
	if len(b.proxies) > 0 {
		faults["cut"] = func(rng *rand.Rand) string { return r.netFault(rng, b.proxies, "cut") }
		faults["delay"] = func(rng *rand.Rand) string { return r.netFault(rng, b.proxies, "delay") }
	}
	for k, f := range b.faults {
		faults[k] = f
	}
	for k, f := range r.redisSideFaults(b.nodes) {
		faults[k] = f
	}
	kinds := make([]string, 0, len(faults))
	for k := range faults {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)

	cost := r.startCost(b.nodes)
	done := injectFaults(t, faults, window, rng, func() {
		// Let the fault play out before the next: a leader, then a ttl
		// more (a leader cut off may still answer 200 until its deadline),
		// then a leader again. Its L1 is measured up to the next fault.
		waitChaosLeader(t, p, 3*ttl+15*time.Second)
		pause(ttl)
		waitChaosLeader(t, p, 3*ttl+15*time.Second)
	})
	settle := time.Now()
	waitUntil(t, 10*time.Second, "the last fault's aftermath to be sampled", func() bool { return time.Since(settle) > time.Second })
	spans, total, _, bad := p.terms()
	run := cost.stop(len(spans))
	p.stop()
	r.stopAll()
	// Each fault may cost a few leadership changes, and a candidate cut
	// off or facing a restarted node retries every renewInterval. During
	// a Sentinel failover, until the new master's replicas acknowledge
	// again (up to ~15s), each acquisition is refused and given back; it
	// announces nothing, so the controller writes nothing for it (it did,
	// 114 writes a minute, before grants waited for their replicas to be
	// announced).
	changes := len(spans) + len(done)
	run.check(t, "under faults", changes)
	// A node that loses its counter (restarted without persistence,
	// flushed, or a Sentinel replica promoted) starts it anew from its
	// clock at its first grant after the loss: one jump per such node at
	// most (a minority fault restarts two nodes empty, and the two may
	// join different grants). Any other leadership change adds about
	// one, since a failed attempt takes its count back. (A median of the
	// growth is no test: a run with two changes, one of them across a
	// restart, has a jump for a median.)
	growth := fenceGrowth(spans)
	jumps, reseeds := 0, 0
	for _, g := range growth {
		if g > 3 {
			jumps++
		}
	}
	for _, f := range done {
		// A restart from a snapshot keeps an older counter, which the
		// restart guard starts again from the clock.
		switch {
		case f.kind == "minority":
			reseeds += len(strings.Split(f.target, "+")) // each node restarts empty
		case f.kind == "restart" || f.kind == "snapshot-restart" || f.kind == "flush" || failoverKinds[f.kind]:
			reseeds++
		}
	}
	if jumps > reseeds {
		t.Errorf("fencing tokens grew by more than 3 in %d leadership changes (%v), with %d nodes whose counter a fault reset; a failed attempt must take its count back", jumps, growth, reseeds)
	}
	for _, s := range bad {
		t.Error(s)
	}
	over, regr := overlaps(spans), regressions(spans)
	if len(over) > 0 {
		t.Errorf("S1: %d overlapping terms:\n  %s", len(over), strings.Join(over, "\n  "))
	}
	if len(regr) > 0 {
		t.Errorf("S3: %d fencing regressions:\n  %s", len(regr), strings.Join(regr, "\n  "))
	}
	r.checkJournal(spans)
	cmdRuns := readRuns(t, r.cmdJournal())
	if o := cmdOverlaps(cmdRuns); len(o) > 0 {
		t.Errorf("S1 of the command: it ran on two candidates at once, %d times:\n  %s", len(o), strings.Join(o, "\n  "))
	}
	t.Logf("the command ran %d times on the agents that run it", len(cmdRuns))
	worst := map[string]time.Duration{}
	for i, f := range done {
		next := settle
		if i+1 < len(done) {
			next = done[i+1].at
		}
		gap := maxGap(spans, f.at, next)
		worst[f.kind] = max(worst[f.kind], gap)
		if limit := chaosL1Bound(f); gap > limit {
			t.Errorf("L1: %s fault on %s at %s: no leader for %v, more than %v", f.kind, f.target, clock(f.at), gap.Round(time.Millisecond), limit)
		}
	}
	var l1 []string
	for _, k := range kinds {
		if g, ok := worst[k]; ok {
			l1 = append(l1, fmt.Sprintf("%s %v", k, g.Round(10*time.Millisecond)))
		}
	}
	median := int64(0)
	if len(growth) > 0 {
		median = growth[len(growth)/2]
	}
	return fmt.Sprintf("%-9s %6d %8d %6d %12d %15d %11.1f %11.1f %7d %9.1f  %s", name, len(done), total, len(spans), len(over), len(regr),
		idle.maxScriptsPerSecond(), run.maxScriptsPerSecond(), median, run.writesPerMinute, strings.Join(l1, ", "))
}

// injectFaults injects faults for window, by kind: every kind once, in a
// random order, then again, and so on, so that a short run still sees
// each; after each it logs it and calls playOut, which waits for its
// aftermath. It returns them in order.
func injectFaults(t *testing.T, faults map[string]func(*rand.Rand) string, window time.Duration, rng *rand.Rand, playOut func()) []chaosFault {
	kinds := slices.Sorted(maps.Keys(faults))
	var done []chaosFault
	var order []string
	for end := time.Now().Add(window); time.Now().Before(end); {
		if len(order) == 0 {
			for _, i := range rng.Perm(len(kinds)) {
				order = append(order, kinds[i])
			}
		}
		kind := order[0]
		order = order[1:]
		f := chaosFault{kind: kind, at: time.Now()}
		f.target = faults[kind](rng)
		f.end = time.Now()
		done = append(done, f)
		t.Logf("%s fault %s on %s (%v)", clock(f.at), kind, f.target, f.end.Sub(f.at).Round(time.Millisecond))
		playOut()
	}
	return done
}

// failoverKinds are the faults that move the lock to another server of
// the deployment: a Sentinel or Cluster failover, a slot migration. Until
// the new master's replicas acknowledge again, refused acquisitions show
// their holder for an instant, and a promoted replica may restart a
// counter it had not received.
var failoverKinds = map[string]bool{
	"failover": true, "fresh-failover": true, "master-kill": true, "master-pause": true,
	"failover-force": true, "takeover": true, "fresh-takeover": true, "migrate": true,
}

// chaosL1Bound is the longest time with no leader fault f may cause with
// the chaos timing (ttl 2s). A lost leader's key expires a ttl after its
// last renewal; a restarted node grants nothing for a ttl (plus a second
// of uptime rounding); a failover also waits for the replicas to follow
// the new master.
func chaosL1Bound(f chaosFault) time.Duration {
	ttl := faultTiming.lease
	switch {
	case f.kind == "restart", f.kind == "minority", f.kind == "snapshot-restart":
		return 2*ttl + 3*time.Second
	case failoverKinds[f.kind]:
		// Sentinel's or the Cluster's own timing (noticing the master
		// down, the election, the reconfiguration) and then a ttl. With a
		// fixed waitReplicas equal to the replicas of before, nothing
		// counted until the demoted master had resynced as a replica of
		// the new one (15-16s measured); the default counts the replicas
		// online at each write. 25s, or the failover's own time (until
		// the deployment converged, f.end) and a ttl and 5s when Redis
		// took longer: beside two busy loops, a Sentinel failover took
		// 35.9s, which no lock can shorten.
		return max(25*time.Second, f.end.Sub(f.at)+ttl+5*time.Second)
	}
	return ttl + 2*time.Second
}

// waitChaosLeader waits until exactly one candidate answers 200.
func waitChaosLeader(t *testing.T, p *poller, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for len(p.leaders()) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for one leader; the candidates' last answers:\n%s", within, p.lastAnswers())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// start starts candidate id of kind agent or plugin, answering /leader
// on addr.
func (r *chaosRun) start(id, kind, addr string) {
	r.t.Helper()
	o := proc.Options{Name: id, Env: []string{"KUBECONFIG=" + adminKubeconfig(r.t)}, Log: filepath.Join(r.dir, id+".log")}
	// The journal is on stdout for the plugin (LEADING lines), in the
	// logs on stderr for the agent; both also go to the log file.
	journal := func(line string) { r.journalLine(id, kind, line) }
	switch kind {
	case "agent", "cmd":
		o.Path, o.Args, o.Stderr = r.bins.redislock, []string{"agent", "-lock=chaos", "-http-address=" + addr, "-zap-time-encoding=rfc3339nano"}, journal
		if kind == "cmd" {
			o.Args = append(o.Args, "-on-lost=campaign", "--", "sh", "-c", journalScript(r.cmdJournal()))
		}
		o.Env = append(o.Env, "POD_NAME="+id, "POD_NAMESPACE="+r.ns)
	case "sharded":
		o.Path, o.Stderr = r.bins.sharded, journal
		o.Args = []string{"--sharding-redislock=" + r.ns + "/chaos", "--namespace=" + r.ns, "--zap-encoder=json",
			"--health-probe-bind-address=" + addr, "--metrics-bind-address=0"}
		o.Env = append(o.Env, "POD_NAME="+id)
	default:
		o.Path, o.Args, o.Stdout = r.bins.operator, []string{"-election=redis", "-redislock=" + r.ns + "/chaos", "-identity=" + id, "-http-address=" + addr}, journal
	}
	p, err := proc.Start(o)
	if err != nil {
		r.t.Fatal(err)
	}
	c := &chaosCandidate{id: id, kind: kind, addr: addr, Process: p}
	go func() {
		<-p.Done()
		// Like a container with restartPolicy Always: a candidate that
		// exits (the plugin does when it loses leadership) or is killed
		// comes back a second later, until the run stops.
		time.AfterFunc(time.Second, func() {
			r.mu.Lock()
			stopping := r.stopping || r.retired[id]
			r.mu.Unlock()
			if !stopping {
				r.start(id, kind, addr)
			}
		})
	}()
	r.mu.Lock()
	r.procs[id] = c
	r.mu.Unlock()
}

// journalLine keeps the candidate's own records of leading: the plugin's
// LEADING lines, the agent's "started leading" logs (with their fence).
func (r *chaosRun) journalLine(id, kind, line string) {
	var e journalEntry
	switch kind {
	case "sharded":
		if l, ok := parseReconciled(id, line); ok {
			r.mu.Lock()
			r.reconciles = append(r.reconciles, l)
			r.mu.Unlock()
		}
		return
	case "plugin":
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != "LEADING" {
			return
		}
		nanos, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			return
		}
		e = journalEntry{id: id, at: time.Unix(0, nanos)}
	default:
		var l struct {
			Ts    string `json:"ts"`
			Msg   string `json:"msg"`
			Fence int64  `json:"fence"`
		}
		if json.Unmarshal([]byte(line), &l) != nil || l.Msg != "started leading" {
			return
		}
		at, err := time.Parse(time.RFC3339Nano, l.Ts)
		if err != nil {
			return
		}
		e = journalEntry{id: id, at: at, fence: l.Fence}
	}
	r.mu.Lock()
	r.journal = append(r.journal, e)
	r.mu.Unlock()
}

// checkJournal checks the sampled terms against the candidates' own
// records. Each agent term must match the agent's "started leading" record
// with the same fencing token (a token names one grant), logged within
// journalSkew of the term's first sample (the record is written just
// after the term begins), and the recorded tokens rise in the order of
// the records. The plugin's LEADING
// line comes from client-go's callback, which can lag the lock or never
// come (a replica stopped right after it acquired), so plugin records are
// only counted.
func (r *chaosRun) checkJournal(spans []span) {
	// journalSkew bounds the time between a term's first sample and its
	// record: the agent's log line can wait for a CPU on a loaded machine
	// (CI's run took 100ms+ once; the token already ties the two).
	const journalSkew = time.Second
	journal := r.journalCopy()
	sort.Slice(journal, func(i, j int) bool { return journal[i].at.Before(journal[j].at) })
	for _, s := range spans {
		if !strings.HasPrefix(s.id, "agent-") {
			continue
		}
		var recorded, found bool
		var skew time.Duration
		for _, e := range journal {
			if e.id == s.id && e.fence == s.fence {
				recorded, skew = true, e.at.Sub(s.first)
				found = found || skew.Abs() <= journalSkew
			}
		}
		switch {
		case !recorded:
			r.t.Errorf("journal: %s answered 200 with fence %d from %s, and recorded no such start", s.id, s.fence, clock(s.first))
		case !found:
			r.t.Errorf("journal: %s answered 200 with fence %d from %s, and recorded that start %v from it", s.id, s.fence, clock(s.first), skew)
		}
	}
	var top int64
	plugin := 0
	for _, e := range journal {
		if e.fence == 0 {
			plugin++
			continue
		}
		if e.fence <= top {
			r.t.Errorf("journal: %s began to lead at %s with fence %d, not above %d", e.id, clock(e.at), e.fence, top)
		}
		top = max(top, e.fence)
	}
	r.t.Logf("journal: %d agent and %d plugin records of beginning to lead", len(journal)-plugin, plugin)
}

func (r *chaosRun) addrs() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := map[string]string{}
	for id, c := range r.procs {
		m[id] = c.addr
	}
	return m
}

// leader is the candidate that answers 200 on /leader, or nil.
func (r *chaosRun) leader() *chaosCandidate {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range slices.Sorted(maps.Keys(r.procs)) {
		if leading(r.procs[id].addr) {
			return r.procs[id]
		}
	}
	return nil
}

// newLeader kills the leader (its process restarts, as after a kill) and
// returns once another candidate leads: right after a fresh grant, the
// moment a failover is likeliest to lose it.
func (r *chaosRun) newLeader() {
	before := r.leader()
	if before != nil {
		_ = before.Kill()
	}
	waitUntil(r.t, 3*faultTiming.lease+10*time.Second, "a new leader to fail over under", func() bool {
		now := r.leader()
		return now != nil && now != before
	})
}

// pick chooses a target: the leader half of the time, else anyone.
func (r *chaosRun) pick(rng *rand.Rand) *chaosCandidate {
	if rng.IntN(2) == 0 {
		if l := r.leader(); l != nil {
			return l
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := slices.Sorted(maps.Keys(r.procs))
	return r.procs[ids[rng.IntN(len(ids))]]
}

// leading asks a candidate's /leader once, within 200ms.
func leading(addr string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, code, err := leaderhttp.Get(ctx, "http://"+addr+"/leader")
	return err == nil && code == http.StatusOK
}

// killAndRestart kills a candidate with SIGKILL; it restarts a second
// later, as its container would.
func (r *chaosRun) killAndRestart(rng *rand.Rand) string {
	c := r.pick(rng)
	_ = c.Kill() // fails only if the signal cannot be sent: then the fault is none
	pause(time.Second)
	return c.id
}

// stopPastTTL stops a candidate with SIGSTOP for longer than the ttl: its
// processes, or for an agent running a command the agent alone (a hung
// agent, whose command the guard must stop; a freeze of the command too is
// the process pause that only fencing tokens guard against).
func (r *chaosRun) stopPastTTL(rng *rand.Rand) string {
	c := r.pick(rng)
	signal := c.Signal
	if c.kind == "cmd" {
		signal = func(sig syscall.Signal) error { return syscall.Kill(c.Pid(), sig) }
	}
	_ = signal(syscall.SIGSTOP)
	pause(faultTiming.lease + time.Second)
	_ = signal(syscall.SIGCONT)
	return c.id
}

// cmdJournal is the journal of the "cmd" candidates' command.
func (r *chaosRun) cmdJournal() string { return filepath.Join(r.dir, "command.journal") }

// netFault cuts a candidate off from Redis (for longer than the ttl) or
// delays its traffic (80ms each way, for 3s), at every proxy.
func (r *chaosRun) netFault(rng *rand.Rand, proxies []*chaosProxy, kind string) string {
	c := r.pick(rng)
	for _, p := range proxies {
		p.set(c.id, kind)
	}
	if kind == "cut" {
		pause(faultTiming.lease + time.Second)
	} else {
		pause(3 * time.Second)
	}
	for _, p := range proxies {
		p.set(c.id, "")
	}
	return c.id
}

func (r *chaosRun) stopAll() {
	r.mu.Lock()
	r.stopping = true
	procs := make([]*chaosCandidate, 0, len(r.procs))
	for _, c := range r.procs {
		procs = append(procs, c)
	}
	r.mu.Unlock()
	for _, c := range procs {
		if err := c.Kill(); err != nil {
			r.t.Error(err)
		}
	}
	if r.t.Failed() {
		for _, c := range procs {
			r.t.Logf("%s log (last 2KiB):\n%s", c.id, c.LogTail(2048))
		}
	}
}

// owner names the candidate whose process has the socket bound to the
// local port of addr (a connection's remote end, seen from the proxy).
func (r *chaosRun) owner(addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return ""
	}
	inode := socketInode(tcp.Port)
	if inode == "" {
		return ""
	}
	// The lock only for the copy: every proxied connection asks, and a
	// scan of /proc under it made them queue (thousands, on a loaded
	// machine, while their clients timed out and dialled again).
	r.mu.Lock()
	procs := maps.Clone(r.procs)
	r.mu.Unlock()
	for id, c := range procs {
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", c.Pid()))
		for _, fd := range fds {
			link, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", c.Pid(), fd.Name()))
			if link == "socket:["+inode+"]" {
				return id
			}
		}
	}
	return ""
}

// socketInode finds, in /proc/net/tcp, the inode of the socket whose local
// port is port.
func socketInode(port int) string {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }()
	want := fmt.Sprintf(":%04X", port)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 9 && strings.HasSuffix(fields[1], want) {
			return fields[9]
		}
	}
	return ""
}

// chaosProxy forwards TCP to one Redis node, and can cut or delay the
// connections of one candidate (it asks the kernel which process holds the
// other end).
type chaosProxy struct {
	ln     net.Listener
	target string
	owner  func(net.Addr) string

	mu    sync.Mutex
	fault map[string]string     // candidate -> "cut" or "delay"
	conns map[string][]net.Conn // candidate -> its open connections
}

// startProxy forwards a new loopback port to target; owner names the
// candidate behind each connection.
func startProxy(t *testing.T, target string, owner func(net.Addr) string) *chaosProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &chaosProxy{ln: ln, target: target, owner: owner, fault: map[string]string{}, conns: map[string][]net.Conn{}}
	t.Cleanup(func() { _ = ln.Close() })
	go p.serve()
	return p
}

func (p *chaosProxy) addr() string { return p.ln.Addr().String() }

func (p *chaosProxy) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.forward(in)
	}
}

// forward carries in to the target at once, and looks up meanwhile whose
// connection it is: a lookup (a scan of /proc) before the dial made clients
// time out on a loaded machine, dial again and queue more lookups. Until the
// owner is known, a connection gets no fault; once known, a cut candidate's
// is closed.
func (p *chaosProxy) forward(in net.Conn) {
	out, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = in.Close()
		return
	}
	var owner atomic.Pointer[string]
	go func() {
		id := p.owner(in.RemoteAddr())
		owner.Store(&id)
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.fault[id] == "cut" {
			_ = in.Close()
			return
		}
		p.conns[id] = append(p.conns[id], in)
	}()
	go p.copy(&owner, out, in)
	p.copy(&owner, in, out)
}

// copy forwards src to dst, late by the delay of its owner's fault, until
// either closes.
func (p *chaosProxy) copy(owner *atomic.Pointer[string], dst, src net.Conn) {
	defer func() { _ = dst.Close(); _ = src.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			f := ""
			if id := owner.Load(); id != nil {
				p.mu.Lock()
				f = p.fault[*id]
				p.mu.Unlock()
			}
			if f == "delay" {
				pause(80 * time.Millisecond)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// set gives candidate id the fault ("" to heal it); a cut closes its open
// connections.
func (p *chaosProxy) set(id, fault string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault[id] = fault
	if fault == "cut" {
		for _, c := range p.conns[id] {
			_ = c.Close()
		}
		p.conns[id] = nil
	}
}

// pause waits d: the length of a fault, not a wait for a condition.
func pause(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	<-t.C
}

// singleBackend is one redis-server behind a proxy, at Redis's default
// persistence (save points, no AOF); it can be restarted from its last
// snapshot (a SAVE, then kill -9 some renewals later).
func singleBackend(t *testing.T, r *chaosRun) chaosBackend {
	s := redistest.Start(t, redisproc.Options{Args: []string{"--save", "3600 1 300 100 60 10000"}})
	p := startProxy(t, s.Addr, r.owner)
	return chaosBackend{
		spec:    fmt.Sprintf("    addrs: [%q]\n", p.addr()),
		proxies: []*chaosProxy{p},
		nodes:   []*redisproc.Server{s},
		client:  redistest.Clients(t, s)[0],
		faults: map[string]func(*rand.Rand) string{
			"restart": func(*rand.Rand) string { restartRedis(t, s); return s.Addr },
			// The crash a default Redis suffers: its data comes back from
			// a snapshot older than the last grants and renewals.
			"snapshot-restart": func(rng *rand.Rand) string {
				c := s.Client()
				err := c.Save(context.Background()).Err()
				_ = c.Close()
				if err != nil {
					t.Errorf("SAVE on %s: %v", s.Addr, err)
				}
				pause(time.Duration(rng.Int64N(int64(2 * faultTiming.lease))))
				restartRedis(t, s)
				return s.Addr
			},
		},
	}
}

// redlockBackend is five independent redis-servers behind proxies; one
// can be restarted, or a minority killed and brought back empty.
func redlockBackend(t *testing.T, r *chaosRun) chaosBackend {
	servers := redistest.StartN(t, 5)
	var proxies []*chaosProxy
	var addrs []string
	for _, s := range servers {
		p := startProxy(t, s.Addr, r.owner)
		proxies = append(proxies, p)
		addrs = append(addrs, fmt.Sprintf("%q", p.addr()))
	}
	return chaosBackend{
		spec:    fmt.Sprintf("    mode: Redlock\n    addrs: [%s]\n", strings.Join(addrs, ", ")),
		proxies: proxies,
		nodes:   servers,
		redlock: true,
		faults: map[string]func(*rand.Rand) string{
			"restart": func(rng *rand.Rand) string {
				s := servers[rng.IntN(len(servers))]
				restartRedis(t, s)
				return s.Addr
			},
			"minority": func(rng *rand.Rand) string {
				victims := rng.Perm(len(servers))[:2]
				var names []string
				for _, i := range victims {
					servers[i].Kill()
					names = append(names, servers[i].Addr)
				}
				pause(3 * time.Second)
				for _, i := range victims {
					restartRedis(t, servers[i])
				}
				return strings.Join(names, "+")
			},
		},
	}
}

// sentinelBackend is a master, two replicas and three Sentinels; a
// failover can be forced.
func sentinelBackend(t *testing.T, r *chaosRun) chaosBackend {
	g := redistest.StartSentinelGroup(t, 2, 3)
	var addrs []string
	for _, a := range g.SentinelAddrs() {
		addrs = append(addrs, fmt.Sprintf("%q", a))
	}
	// The product's default: every replica online acknowledges each
	// acquisition and renewal. Sentinel may promote either, judging by
	// offsets it read up to 10s ago, so WAIT for one of two (the old
	// default) let a fresh lock vanish in the failover (3 overlaps in 23
	// failovers). CHAOS_WAIT_REPLICAS sets spec.redis.waitReplicas instead,
	// to compare.
	spec := fmt.Sprintf("    mode: Sentinel\n    masterName: %s\n    addrs: [%s]\n", g.MasterName, strings.Join(addrs, ", "))
	if v := os.Getenv("CHAOS_WAIT_REPLICAS"); v != "" {
		if _, err := strconv.Atoi(v); err != nil {
			t.Fatalf("CHAOS_WAIT_REPLICAS=%q: want a number", v)
		}
		spec += "    waitReplicas: " + v + "\n"
	}
	// failover forces one and returns once the group has converged again
	// (the demoted master and the other replica following the new one),
	// so that the next fault meets a whole deployment; the time until
	// then counts toward this fault's L1.
	failover := func() string {
		old, promoted, err := g.Failover(context.Background())
		if err != nil {
			t.Errorf("Sentinel failover: %v", err)
			return old
		}
		if err := g.WaitConverged(context.Background()); err != nil {
			t.Error(err)
		}
		return old + " -> " + promoted
	}
	// backup takes an RDB of the master as Redis documents it (redis-cli
	// --rdb), with Redis's default diskless-sync delay of 5s, during
	// which it shows as a replica without a listening port.
	backup := func() string {
		ctx := context.Background()
		addr, err := g.MasterAddr(ctx)
		if err != nil {
			t.Error(err)
			return "none"
		}
		m := g.Server(addr)
		c := m.Client()
		defer func() { _ = c.Close() }()
		if err := c.ConfigSet(ctx, "repl-diskless-sync-delay", "5").Err(); err != nil {
			t.Errorf("CONFIG SET repl-diskless-sync-delay on %s: %v", addr, err)
		}
		host, port, _ := net.SplitHostPort(addr)
		dir := t.TempDir()
		cli, err := proc.Start(proc.Options{Name: "redis-cli --rdb", Path: "redis-cli",
			Args: []string{"-h", host, "-p", port, "--rdb", filepath.Join(dir, "dump.rdb")}, Log: filepath.Join(dir, "redis-cli.log")})
		if err != nil {
			t.Error(err)
			return addr
		}
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := cli.Wait(wctx); err != nil {
			_ = cli.Kill()
			t.Errorf("redis-cli --rdb of %s: %v", addr, err)
		}
		if err := c.ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err(); err != nil {
			t.Errorf("CONFIG SET repl-diskless-sync-delay on %s: %v", addr, err)
		}
		return addr
	}
	// addReplica attaches a third replica for a ttl and takes it away
	// again, as a replacement or a migration does; the Sentinels are
	// then reset (SENTINEL RESET, as Redis documents for a removed
	// replica) so that they forget it.
	addReplica := func() string {
		ctx := context.Background()
		addr, err := g.MasterAddr(ctx)
		if err != nil {
			t.Error(err)
			return "none"
		}
		host, port, _ := net.SplitHostPort(addr)
		extra, err := redisproc.Start(redisproc.Options{Args: []string{"--replicaof", host, port}})
		if err != nil {
			t.Error(err)
			return addr
		}
		defer extra.Stop()
		pause(faultTiming.lease)
		extra.Kill()
		pause(2 * time.Second) // past the Sentinels' down-after-milliseconds (1s)
		for _, s := range g.Sentinels {
			c := s.Client()
			if err := c.Do(ctx, "sentinel", "reset", g.MasterName).Err(); err != nil {
				t.Errorf("SENTINEL RESET on %s: %v", s.Addr, err)
			}
			_ = c.Close()
		}
		if err := g.WaitConverged(ctx); err != nil {
			t.Error(err)
		}
		return extra.Addr
	}
	fc := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: g.MasterName, SentinelAddrs: g.SentinelAddrs()})
	t.Cleanup(func() { _ = fc.Close() })
	return chaosBackend{
		spec:   spec,
		nodes:  append([]*redisproc.Server{g.Master}, g.Replicas...),
		client: fc,
		faults: map[string]func(*rand.Rand) string{
			"backup":      func(*rand.Rand) string { return backup() },
			"add-replica": func(*rand.Rand) string { return addReplica() },
			"failover":    func(*rand.Rand) string { return failover() },
			// Where a replica is likeliest to lack the lock: the leader
			// killed, and the failover forced as soon as another leads.
			"fresh-failover": func(*rand.Rand) string {
				r.newLeader()
				return failover()
			},
		},
	}
}

func restartRedis(t *testing.T, s *redisproc.Server) {
	if err := s.Restart(); err != nil {
		t.Errorf("restart %s: %v", s.Addr, err)
	}
}

// clusterBackend is a Redis Cluster of three masters with a replica each
// (a node timeout of 1.5s, so that a master's death is noticed soon), the
// lock on whichever master serves its slot. Its faults aim at that slot:
// the master killed (and restarted empty, as a replica) or paused, each
// failing over on its own; CLUSTER FAILOVER, FORCE and TAKEOVER on its
// replica, also right after a fresh grant; the slot migrated to another
// master and back while candidates run; and the master restarted without
// persistence before anyone notices.
func clusterBackend(t *testing.T, r *chaosRun) chaosBackend {
	cl := redistest.StartReplicatedCluster(t, 3, 1, "--cluster-node-timeout", "1500")
	key := "redislock:{" + lockIn(t, r.ns) + "/chaos}"
	seed := cl.Servers[0].Client()
	t.Cleanup(func() { _ = seed.Close() })
	slot, err := seed.ClusterKeySlot(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	shard := func(not string) redistest.Shard {
		sh, err := cl.WaitHealthy(ctx, slot, not, 1)
		if err != nil {
			t.Error(err)
		}
		return sh
	}
	// failover promotes the slot's replica with CLUSTER FAILOVER and how
	// ("", FORCE or TAKEOVER).
	failover := func(how string) string {
		sh := shard("")
		if sh.Master == nil || len(sh.Replicas) == 0 {
			return "none"
		}
		c := sh.Replicas[0].Client()
		defer func() { _ = c.Close() }()
		args := []any{"cluster", "failover"}
		if how != "" {
			args = append(args, how)
		}
		// A manual failover the master does not join within
		// cluster-mf-timeout (5s) is dropped without a word: ask again.
		promoted := func(context.Context) (bool, error) {
			now, err := cl.SlotShard(ctx, slot)
			return err == nil && now.Master != sh.Master, nil
		}
		for attempt := 1; ; attempt++ {
			if err := c.Do(ctx, args...).Err(); err != nil {
				t.Errorf("CLUSTER FAILOVER %s on %s: %v", how, sh.Replicas[0].Addr, err)
				return "none"
			}
			err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, promoted)
			if err == nil {
				break
			}
			if attempt == 3 {
				// Redis's call, not ours: the masters may refuse their
				// votes (one vote per master's replicas per twice the node
				// timeout). The fault did not happen.
				t.Logf("CLUSTER FAILOVER %s on %s: asked 3 times, the slot's master is still %s", how, sh.Replicas[0].Addr, sh.Master.Addr)
				return "refused"
			}
		}
		shard(sh.Master.Addr)
		return sh.Master.Addr + " -> " + sh.Replicas[0].Addr
	}
	// Masters with different replica counts: the lock's master has a
	// second replica, the others one (waits are per master).
	if m := shard("").Master; m != nil {
		cl.AddReplica(t, m)
	}
	// otherMaster picks a master other than from.
	otherMaster := func(rng *rand.Rand, from *redisproc.Server) *redisproc.Server {
		var others []*redisproc.Server
		for _, s := range cl.Servers {
			if s == from {
				continue
			}
			c := s.Client()
			info, err := c.Info(ctx, "replication").Result()
			_ = c.Close()
			if err == nil && strings.Contains(info, "role:master") {
				others = append(others, s)
			}
		}
		if len(others) == 0 {
			return nil
		}
		return others[rng.IntN(len(others))]
	}
	var addrs []string
	for _, a := range cl.Addrs {
		addrs = append(addrs, fmt.Sprintf("%q", a))
	}
	return chaosBackend{
		spec:   fmt.Sprintf("    mode: Cluster\n    addrs: [%s]\n", strings.Join(addrs, ", ")),
		nodes:  cl.Servers,
		client: redistest.ClusterClient(t, cl.Addrs),
		faults: map[string]func(*rand.Rand) string{
			"master-kill": func(*rand.Rand) string {
				m := shard("").Master
				if m == nil {
					return "none"
				}
				m.Kill()
				// Restarted at once, it would come back as the master, empty:
				// the "restart" fault. Restarted once a replica took over, it
				// rejoins as that one's replica.
				waitUntil(t, 30*time.Second, "a replica to take over from the killed master", func() bool {
					sh, err := cl.SlotShard(ctx, slot)
					return err == nil && sh.Master != m
				})
				restartRedis(t, m)
				return m.Addr + " -> " + shard(m.Addr).Master.Addr
			},
			"master-pause": func(*rand.Rand) string {
				m := shard("").Master
				if m == nil {
					return "none"
				}
				if err := m.Pause(); err != nil {
					t.Error(err)
					return m.Addr
				}
				waitUntil(t, 30*time.Second, "a replica to take over from the paused master", func() bool {
					sh, err := cl.SlotShard(ctx, slot)
					return err == nil && sh.Master != m
				})
				if err := m.Resume(); err != nil {
					t.Error(err)
				}
				return m.Addr + " -> " + shard(m.Addr).Master.Addr
			},
			"failover":       func(*rand.Rand) string { return failover("") },
			"failover-force": func(*rand.Rand) string { return failover("force") },
			"takeover":       func(*rand.Rand) string { return failover("takeover") },
			"fresh-takeover": func(*rand.Rand) string {
				r.newLeader()
				return failover("takeover")
			},
			"migrate": func(rng *rand.Rand) string {
				from := shard("").Master
				if from == nil {
					return "none"
				}
				to := otherMaster(rng, from)
				if to == nil {
					return "none"
				}
				if err := cl.MigrateSlot(ctx, slot, to); err != nil {
					t.Error(err)
				}
				pause(faultTiming.lease) // renewals and attempts on the new master
				if err := cl.MigrateSlot(ctx, slot, from); err != nil {
					t.Error(err)
				}
				shard("")
				return from.Addr + " -> " + to.Addr + " -> " + from.Addr
			},
			"restart": func(*rand.Rand) string {
				m := shard("").Master
				if m == nil {
					return "none"
				}
				restartRedis(t, m)
				shard("")
				return m.Addr
			},
			// A migration that stalls MIGRATING, no key moved, for longer
			// than renewDeadline: the holder renews on throughout.
			"migrate-stall": func(rng *rand.Rand) string {
				from := shard("").Master
				if from == nil {
					return "none"
				}
				to := otherMaster(rng, from)
				if to == nil {
					return "none"
				}
				if err := cl.MigrateSlotHeld(ctx, slot, to, faultTiming.lease); err != nil {
					t.Error(err)
				}
				if err := cl.MigrateSlot(ctx, slot, from); err != nil {
					t.Error(err)
				}
				shard("")
				return from.Addr + " -> " + to.Addr + " -> " + from.Addr
			},
		},
	}
}
