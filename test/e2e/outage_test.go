package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/redislock/redislock/internal/leaderhttp"
	"github.com/redislock/redislock/internal/testing/benchresult"
	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
)

// apiServerOutage is how long the outage scenario keeps the API server
// stopped: long past every RenewDeadline and LeaseDuration it uses.
const apiServerOutage = 30 * time.Second

// outageReplicas is how many replicas of the sample operator the outage
// scenario runs, and outageRestartBackoff how long an exited one waits
// for its first restart (doubling after that, as a kubelet's back-off).
const (
	outageReplicas       = 3
	outageRestartBackoff = 10 * time.Second
)

// outageRow is what one election method did through the outage.
type outageRow struct {
	method            string
	leaderChanges     int           // LEADING lines from the outage on
	exits, restarts   int           // replica exits, and the restarts a kubelet would make
	noLeader          time.Duration // time from the outage on with no replica leading
	firstReconcile    time.Duration // from the API server's return to the first write of a changed probe
	leaderKeptLeading bool
}

// TestLeadershipThroughAPIServerOutage stops the API server (SIGSTOP of
// kube-apiserver) for 30s under three replicas of the sample operator, for
// Lease election and for a RedisLock, restarting exited replicas as a
// kubelet would (back-off from 10s, doubling), and measures what each
// method does: Lease election's leader cannot renew, steps down after
// RenewDeadline and controller-runtime exits; a RedisLock's leader keeps
// leading, since Redis is reachable, and reconciles as soon as the API
// server is back. `make test` runs it, and `make bench` for the report.
//
//	OUTAGE_JSON  a file to write the results to, for
//	             test/bench/cmd/benchreport (optional)
func TestLeadershipThroughAPIServerOutage(t *testing.T) {
	bin := goBuild(t, "./test/e2e/sampleoperator")
	d := durations{lease: 3 * time.Second, renew: 2 * time.Second, retry: 500 * time.Millisecond}
	var rows []outageRow
	for _, method := range []string{"lease", "redis"} {
		t.Run(method, func(t *testing.T) {
			f, ns := methodFleet(t, bin, method, d)
			rows = append(rows, outageScenario(t, method, f, ns))
		})
	}
	if path := os.Getenv("OUTAGE_JSON"); path != "" && len(rows) > 0 {
		out := benchresult.Outage{Outage: apiServerOutage.String(), Replicas: outageReplicas, RestartBackoff: outageRestartBackoff.String(), Timing: d.timing()}
		for _, r := range rows {
			out.Methods = append(out.Methods, r.json())
		}
		writeJSON(t, path, out)
	}
}

// json is r as OUTAGE_JSON has it.
func (r outageRow) json() benchresult.OutageMethod {
	return benchresult.OutageMethod{Method: r.method, LeaderKeptLeading: r.leaderKeptLeading, LeaderChanges: r.leaderChanges,
		Exits: r.exits, Restarts: r.restarts, NoLeaderSeconds: r.noLeader.Seconds(), FirstReconcileSeconds: r.firstReconcile.Seconds()}
}

// TestAgentLeadsThroughAPIServerOutage: three injected agents (as local
// processes) on a RedisLock; while kube-apiserver is stopped for 30s, the
// leading agent keeps leading, every /leader answer of every agent agrees
// on it, and its /leader says nothing of the API server: leadership does
// not depend on it. The pod label, which needs the API server, catches up
// when it is back.
func TestAgentLeadsThroughAPIServerOutage(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{Password: "outage-pass"})
	startController(t, nil)
	ns := newNamespace(t)
	// Generous timing: the verdict is about the API server, and one
	// leader for 30s must not hang on a renewal delayed by the machine.
	d := durations{lease: 6 * time.Second, renew: 4 * time.Second, retry: time.Second}
	applyRedisLock(t, ns, "worker", s, "outage-pass", d)
	fl, ids, p := startAgents(t, ns, "worker", agentUser(t, ns))
	leader := p.waitLeader(t, "", 3*d.lease+5*time.Second)
	waitLabels(t, ns, leader, ids)
	resume := stopAPIServer(t, testEnv)
	p.steady(t, apiServerOutage) // one leader, every answer, throughout
	during, _, err := leaderhttp.Get(context.Background(), "http://"+fl.proc(leader).addr+"/leader")
	resume()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the leader's /leader with the API server stopped for %v: %+v", apiServerOutage, during)
	if got := p.leaders(); len(got) != 1 || got[0] != leader || !during.Leading || during.Error != "" {
		t.Fatalf("leaders %v after the outage, /leader during it %+v; want %s leading throughout, with no error", got, during, leader)
	}
	waitLabels(t, ns, leader, ids)
}

// outageScenario runs the outage on f, whose replicas elect by method and
// reconcile probes in namespace ns, and returns what happened.
func outageScenario(t *testing.T, method string, f *fleet, ns string) outageRow {
	for i := 1; i <= outageReplicas; i++ {
		f.start(fmt.Sprintf("replica-%d", i))
	}
	first := f.waitLeading(0, "", 20*time.Second)
	f.waitStarted(outageReplicas, 20*time.Second)
	probe := newProbe(t, ns)
	probe.bump(t, f, 20*time.Second)
	restarts := f.restartOnExit(t, outageRestartBackoff)
	from := f.mark()
	stopped := time.Now()
	resume := stopAPIServer(t, testEnv)
	time.Sleep(apiServerOutage) // the scenario itself: the API server is away this long
	resume()
	back := time.Now()
	// The first reconcile after the outage is that of a change made once
	// the API server answers again: the probe's next seq.
	written := probe.bump(t, f, 2*time.Minute)
	row := outageRow{method: method, firstReconcile: written.Sub(back), restarts: int(restarts())}
	f.mu.Lock()
	events := append([]event(nil), f.journal[from:]...)
	f.mu.Unlock()
	row.leaderKeptLeading = true
	for _, e := range events {
		switch e.kind {
		case "LEADING":
			row.leaderChanges++
		case "EXIT":
			row.exits++
			if e.id == first.id {
				row.leaderKeptLeading = false
			}
		}
	}
	row.noLeader = leaderless(events, first.id, stopped, time.Now())
	t.Logf("%s: %+v", row.method, row)
	switch row.method {
	case "redis":
		if !row.leaderKeptLeading || row.leaderChanges != 0 || row.exits != 0 || row.noLeader != 0 {
			t.Errorf("RedisLock election through the outage: %+v; want the leader to keep leading, no change, no exit; journal:\n%s", row, f.dump())
		}
	default:
		// The baseline's known behaviour, checked so that the table
		// shows an outage that happened.
		if row.leaderKeptLeading || row.exits == 0 {
			t.Errorf("Lease election through the outage: %+v; want its leader to step down and exit; journal:\n%s", row, f.dump())
		}
	}
	return row
}

// leaderless returns how long, between from and to, no replica led, by
// the journal events (which start with leader leading).
func leaderless(events []event, leader string, from, to time.Time) time.Duration {
	leading := map[string]bool{leader: true}
	var none time.Duration
	last := from
	for _, e := range events {
		if len(leading) == 0 {
			none += e.at.Sub(last)
		}
		last = e.at
		switch e.kind {
		case "LEADING":
			leading[e.id] = true
		case "EXIT":
			delete(leading, e.id)
		}
	}
	if len(leading) == 0 {
		none += to.Sub(last)
	}
	return none
}

// restartOnExit restarts each replica of f that exits, as a kubelet
// restarts a container: after base, doubling per replica, until the test
// ends. It returns the count of restarts so far.
func (f *fleet) restartOnExit(t *testing.T, base time.Duration) func() int64 {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var n int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		backoff := map[string]time.Duration{}
		for seen := f.mark(); ; {
			f.mu.Lock()
			events, changed := f.journal[seen:], f.changed
			seen = len(f.journal)
			f.mu.Unlock()
			for _, e := range events {
				if e.kind != "EXIT" {
					continue
				}
				wait := max(backoff[e.id], base)
				backoff[e.id] = 2 * wait
				go func() {
					select {
					case <-ctx.Done():
					case <-time.After(wait):
						if err := f.launch(e.id); err != nil {
							t.Errorf("restart %s: %v", e.id, err)
							return
						}
						mu.Lock()
						n++
						mu.Unlock()
					}
				}()
			}
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return func() int64 {
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}

// stopAPIServer stops (SIGSTOP) the kube-apiserver of env until resume,
// or the test's end.
func stopAPIServer(t *testing.T, env *envtest.Environment) (resume func()) {
	t.Helper()
	pid := apiServerPid(t, env)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	resume = func() {
		once.Do(func() {
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(resume)
	return resume
}

// apiServerPid returns the pid of env's kube-apiserver, the child of this
// test process that serves env's secure port.
func apiServerPid(t *testing.T, env *envtest.Environment) int {
	t.Helper()
	port := env.ControlPlane.APIServer.SecureServing.Port
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range stats {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...
		s := string(raw)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || close < open || s[open+1:close] != "kube-apiserver" {
			continue
		}
		fields := strings.Fields(s[close+1:])
		if len(fields) < 2 || fields[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
		if err != nil || !slices.Contains(strings.Split(string(cmdline), "\x00"), "--secure-port="+port) {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(s[:open]))
		if err != nil {
			t.Fatal(err)
		}
		return pid
	}
	t.Fatalf("no kube-apiserver child of this test process serves port %s", port)
	return 0
}

// probe is a ConfigMap that the sample operator's leader writes to once
// per seq (ConfigMapReconciler).
type probe struct {
	ns, name string
	seq      int
}

func newProbe(t *testing.T, ns string) *probe {
	t.Helper()
	p := &probe{ns: ns, name: "probe"}
	mustKubectl(t, "create", "configmap", "-n", ns, p.name, "--from-literal=seq=0")
	mustKubectl(t, "label", "configmap", "-n", ns, p.name, "e2e.redislock.io/probe=true")
	return p
}

// bump sets the probe's next seq, retrying while the API server does not
// answer, and waits for a replica's RECONCILED line for it; it returns
// when that write was sent.
func (p *probe) bump(t *testing.T, f *fleet, within time.Duration) time.Time {
	t.Helper()
	p.seq++
	seq := strconv.Itoa(p.seq)
	from := f.mark()
	var last string
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, within, true, func(context.Context) (bool, error) {
		out, err := kubectl(t, "patch", "configmap", "-n", p.ns, p.name, "--type=merge", "-p", `{"data":{"seq":"`+seq+`"}}`)
		last = out
		return err == nil, nil
	}); err != nil {
		t.Fatalf("set the probe's seq %s: %s", seq, last)
	}
	e := f.waitEvent(from, within, "a RECONCILED line for seq "+seq, func(e event) bool { return e.kind == "RECONCILED" && e.seq == seq })
	return e.at
}

// TestWriteGateStopsADeposedLeader pauses the sample operator's leader
// (SIGSTOP) in the middle of a probe's reconcile, between its read and its
// write, until a standby has taken over and written, then resumes it
// (SIGCONT). Without the write gate the deposed leader's write reaches the
// API server, after the new leader's; with the gate (-write-gate,
// election.Lock.Gate) it is refused in the process, and the API server
// never sees it.
//
// The order is the test's, not a timer's: the leader holds its write
// (-hold-probe) until it is resumed, and it exits only after that write
// was answered or refused, however soon it notices the lost lock on
// waking (controller-runtime does not wait for reconciles then).
func TestWriteGateStopsADeposedLeader(t *testing.T) {
	bin := goBuild(t, "./test/e2e/sampleoperator")
	d := durations{lease: 3 * time.Second, renew: 2 * time.Second, retry: 500 * time.Millisecond}
	for _, gated := range []bool{false, true} {
		t.Run(fmt.Sprintf("gate=%v", gated), func(t *testing.T) {
			_, ns, name := startRedisLock(t, d)
			args := redisArgs(ns, name)
			if gated {
				args = append(args, "-write-gate")
			}
			// The seq to write is this subtest's own: every replica
			// reconciles every probe ConfigMap, and envtest deletes no
			// namespace, so the probes of earlier tests (or runs, with
			// -count) are still there, and their lines must not match.
			seq := ns
			f := newFleet(t, bin, args)
			// Only the first leader holds its write of seq: the next one
			// writes at once.
			f.startWith("replica-1", "-hold-probe="+seq)
			old := f.waitLeading(0, "", 20*time.Second)
			f.start("replica-2")
			f.waitStarted(2, 20*time.Second)
			p := newProbe(t, ns)
			from := f.mark()
			mustKubectl(t, "patch", "configmap", "-n", ns, p.name, "--type=merge", "-p", `{"data":{"seq":"`+seq+`"}}`)
			f.waitEvent(from, 20*time.Second, "the leader's RECONCILING line for seq "+seq, func(e event) bool { return e.kind == "RECONCILING" && e.id == old.id && e.seq == seq })
			leader := f.currentLeader()
			if leader.id != old.id {
				t.Fatalf("%s leads, not %s, before the pause; journal:\n%s", leader.id, old.id, f.dump())
			}
			f.mu.Lock()
			leader.signaled = true // its LEADING overlaps the next leader's by design
			f.mu.Unlock()
			if err := leader.p.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			next := f.waitLeading(from, old.id, 3*d.lease+10*time.Second)
			newWrite := f.waitEvent(from, 20*time.Second, "the new leader's write of seq "+seq, func(e event) bool { return e.kind == "RECONCILED" && e.id == next.id && e.seq == seq })
			resumed := f.mark()
			if err := leader.p.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			// On waking the old leader sends (or, gated, tries) its held
			// write; client-go notices the lost lock within RenewDeadline
			// and controller-runtime stops; the process exits once the
			// held write was answered.
			select {
			case <-leader.p.Done(): // every line it printed is journaled
			case <-time.After(30 * time.Second):
				t.Fatalf("%s still running 30s after it lost the lock; journal:\n%s", old.id, f.dump())
			}
			kind := "RECONCILED"
			if gated {
				kind = "REFUSED"
			}
			var oldWrite *event
			f.mu.Lock()
			for _, e := range f.journal[resumed:] {
				if e.kind == kind && e.id == old.id && e.seq == seq {
					oldWrite = &e
					break
				}
			}
			f.mu.Unlock()
			written := mustKubectl(t, "get", "configmap", "-n", ns, p.name, "-o", `jsonpath={.metadata.annotations.e2e\.redislock\.io/written-by-`+old.id+`}`)
			t.Logf("gate=%v: the deposed leader's write on the API server: %q; journal:\n%s", gated, written, f.dump())
			switch {
			case oldWrite == nil:
				// The precondition: the deposed leader's write was tried
				// after the new leader's, so the verdict is about the gate.
				t.Errorf("no %s line from %s for seq %s after it was resumed: the scenario did not run", kind, old.id, seq)
			case !oldWrite.at.After(newWrite.at):
				t.Errorf("%s's write was tried at %s, not after %s's at %s", old.id, oldWrite.at.Format("15:04:05.000000"), next.id, newWrite.at.Format("15:04:05.000000"))
			}
			switch {
			case gated && written == seq:
				t.Errorf("with the gate, the deposed leader %s wrote seq %s after %s took over", old.id, seq, next.id)
			case !gated && written != seq:
				t.Errorf("without the gate, the deposed leader's write did not land (%q): the scenario did not reproduce what the gate is for", written)
			}
		})
	}
}
