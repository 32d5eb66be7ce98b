package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/redislock/redislock/internal/inject"
	"github.com/redislock/redislock/internal/testing/proc"
	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/internal/testing/testenv"
)

// cmdRun is one run of the command, from its journal: its start, its last
// record (a tick, or the stop its SIGTERM trap writes) and whether it
// recorded a stop.
type cmdRun struct {
	id          string
	start, last time.Time
	stopped     bool
}

// journalScript is the command the agents run: it records its start, a
// tick every 50ms and, on SIGTERM, its stop, in journal, each line with
// the pod's name and the time in ns.
func journalScript(journal string) string {
	rec := func(what string) string { return `echo "` + what + ` $POD_NAME $(date +%s%N)" >> ` + journal }
	return rec("start") + `; trap '` + rec("stop") + `; exit 0' TERM; while :; do ` + rec("tick") + `; sleep 0.05; done`
}

// readRuns parses the journal into runs, in the order they started.
func readRuns(t *testing.T, journal string) []cmdRun {
	t.Helper()
	raw, err := os.ReadFile(journal)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var runs []cmdRun
	open := map[string]int{} // id: index of its run going on
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		ns, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			continue
		}
		at := time.Unix(0, ns)
		switch f[0] {
		case "start":
			open[f[1]] = len(runs)
			runs = append(runs, cmdRun{id: f[1], start: at, last: at})
		case "tick", "stop":
			if i, ok := open[f[1]]; ok {
				runs[i].last = at
				runs[i].stopped = f[0] == "stop"
			}
		}
	}
	slices.SortFunc(runs, func(a, b cmdRun) int { return a.start.Compare(b.start) })
	return runs
}

// cmdOverlaps lists the runs that began before an earlier one's last
// record: the command ran on two candidates at once.
func cmdOverlaps(runs []cmdRun) []string {
	var out []string
	for i := 1; i < len(runs); i++ {
		for _, prev := range runs[:i] {
			if runs[i].start.Before(prev.last) {
				out = append(out, fmt.Sprintf("%s started at %s, before %s's last record at %s", runs[i].id, clock(runs[i].start), prev.id, clock(prev.last)))
			}
		}
	}
	return out
}

// The agent's run-while-leading mode: `redislock agent ... -- CMD` runs
// CMD only while it leads. Three agents with a command that journals its
// life: the journal never shows it running on two at once through SIGKILL
// of the leading agent alone (its guard and command die with it), SIGSTOP
// of the leading agent alone past the ttl (the guard keeps the deadline
// and stops the command), a paused Redis (the leader steps down and stops
// it), and SIGTERM (the command's trap runs, the agent exits with its code
// and the lock is released at once).
func TestCommandRunsOnlyWhileLeading(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{Password: "cmd-pass"})
	startController(t, nil)
	ns := newNamespace(t)
	// A 500ms grace after SIGTERM ((ttl - renewDeadline) / 2), and as much
	// again before another candidate can be granted the lock.
	d := durations{lease: 4 * time.Second, renew: 3 * time.Second, retry: 500 * time.Millisecond}
	applyRedisLock(t, ns, "worker", s, "cmd-pass", d)
	journal := filepath.Join(t.TempDir(), "journal")
	fl, _, p := startAgents(t, ns, "worker", agentUser(t, ns), "-on-lost=campaign", "--", "sh", "-c", journalScript(journal))
	ttl := d.lease
	// runningOn waits until the command's latest run is on a candidate
	// other than not, and returns it.
	runningOn := func(not string, since time.Time) cmdRun {
		var last cmdRun
		waitUntil(t, 3*ttl+10*time.Second, "the command to run on a candidate other than "+not, func() bool {
			runs := readRuns(t, journal)
			if len(runs) == 0 {
				return false
			}
			last = runs[len(runs)-1]
			return last.id != not && last.start.After(since) && time.Since(last.last) < time.Second
		})
		return last
	}
	agentSignal := func(id string, sig syscall.Signal) {
		// The agent's process alone, not its group: a hung or killed
		// agent whose command would go on without the guard.
		if err := syscall.Kill(fl.proc(id).Pid(), sig); err != nil {
			t.Fatal(err)
		}
	}
	var log []string
	run := runningOn("", time.Time{})
	log = append(log, "first run on "+run.id)

	// SIGKILL of the agent alone: its guard and the command die with it.
	at := time.Now()
	killed := run.id
	agentSignal(killed, syscall.SIGKILL)
	<-fl.proc(killed).Done()
	run = runningOn(killed, at)
	log = append(log, fmt.Sprintf("SIGKILL of %s's agent: the command ran on %s %v later", killed, run.id, run.start.Sub(at).Round(time.Millisecond)))
	fl.start(killed, fl.proc(killed).addr)

	// SIGSTOP of the agent alone past the ttl: the guard stops the command
	// at the deadline, and another candidate runs it.
	stopped := run.id
	at = time.Now()
	agentSignal(stopped, syscall.SIGSTOP)
	next := runningOn(stopped, at)
	waitUntil(t, 10*time.Second, "SIGSTOP to last longer than the ttl", func() bool { return time.Since(at) > ttl+time.Second })
	agentSignal(stopped, syscall.SIGCONT)
	for _, r := range readRuns(t, journal) {
		if r.id == stopped && r.start.Before(at) {
			run = r
		}
	}
	log = append(log, fmt.Sprintf("SIGSTOP of %s's agent: its command stopped (trap ran: %v) %v after the stop; %s ran it %v after that",
		stopped, run.stopped, run.last.Sub(at).Round(time.Millisecond), next.id, next.start.Sub(run.last).Round(time.Millisecond)))

	// Redis paused: the leader cannot renew, steps down at its deadline and
	// stops the command.
	leader := next.id
	at = time.Now()
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 3*ttl, "the command to stop with Redis paused", func() bool {
		runs := readRuns(t, journal)
		return len(runs) > 0 && runs[len(runs)-1].stopped
	})
	runs := readRuns(t, journal)
	gone := runs[len(runs)-1]
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	lostAt := p.lastLead(leader)
	log = append(log, fmt.Sprintf("Redis paused: %s's /leader turned 503 %v after the pause, its command stopped %v after that",
		leader, lostAt.Sub(at).Round(time.Millisecond), gone.last.Sub(lostAt).Round(time.Millisecond)))
	run = runningOn("", at)

	// SIGTERM: the trap runs, the agent releases at once and exits with
	// the command's code, 0.
	termed := run.id
	at = time.Now()
	agentSignal(termed, syscall.SIGTERM)
	if err := fl.waitExit(termed, 30*time.Second); err != nil {
		t.Errorf("%s after SIGTERM: %v; want exit code 0, the command's", termed, err)
	}
	next = runningOn(termed, at)
	for _, r := range readRuns(t, journal) {
		if r.id == termed && r.start.Equal(run.start) {
			run = r
		}
	}
	log = append(log, fmt.Sprintf("SIGTERM of %s: its command stopped (trap ran: %v) %v later; %s ran it %v after that",
		termed, run.stopped, run.last.Sub(at).Round(time.Millisecond), next.id, next.start.Sub(run.last).Round(time.Millisecond)))
	if !run.stopped {
		t.Errorf("%s's command has no stop record after SIGTERM: its trap did not run", termed)
	}

	runs = readRuns(t, journal)
	t.Logf("%d runs of the command:\n  %s", len(runs), strings.Join(log, "\n  "))
	if o := cmdOverlaps(runs); len(o) > 0 {
		t.Errorf("the command ran on two candidates at once, %d times:\n  %s", len(o), strings.Join(o, "\n  "))
	}
	p.checkNoOverlap(t)
}

// The webhook's run-container mode, run as a kubelet would run the pod
// (envtest has none): each pod's init container installs the binary, then
// the wrapped container's command (the agent, with the app's own command
// after "--") runs with the pod's environment. Of two such pods, one runs
// the app's command at a time, and a SIGTERM hands it to the other.
func TestWrappedContainerRunsItsCommandOnlyWhileLeading(t *testing.T) {
	ns := newNamespace(t)
	config := "redislock-injector-" + ns
	args := append([]string{"-agent-image=example.test/redislock:e2e"}, applyWebhook(t, config, ns).Args...)
	startController(t, []string{"POD_NAMESPACE=" + ns}, args...)
	waitUntil(t, 30*time.Second, "the controller to set the caBundle", func() bool {
		out, _ := kubectl(t, "get", "mutatingwebhookconfiguration", config, "-o", "jsonpath={.webhooks[0].clientConfig.caBundle}")
		return out != ""
	})
	s := redistest.Start(t, redisproc.Options{Password: "wrap-pass"})
	d := durations{lease: 4 * time.Second, renew: 3 * time.Second, retry: 500 * time.Millisecond}
	applyRedisLock(t, ns, "worker", s, "wrap-pass", d)
	kubeconfig := agentUser(t, ns)
	k8s, err := testenv.Client(apiServer(t))
	if err != nil {
		t.Fatal(err)
	}
	bin := goBuild(t, ".")
	journal := filepath.Join(t.TempDir(), "journal")
	pods := map[string]*proc.Process{}
	for _, name := range []string{"wrap-a", "wrap-b"} {
		install, err := testenv.CreateInjectedPod(context.Background(), k8s, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{inject.LockAnnotation: "worker", inject.RunContainerAnnotation: "app"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.test/app:1", Command: []string{"sh", "-c", journalScript(journal)}}}},
		}, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var pod corev1.Pod
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &pod); err != nil {
			t.Fatal(err)
		}
		// The pod's paths, in a directory of its own on this machine, and
		// a port of its own.
		root := t.TempDir()
		local := func(arg string) string {
			arg = strings.ReplaceAll(arg, filepath.Dir(inject.BinPath), filepath.Join(root, "bin"))
			arg = strings.ReplaceAll(arg, inject.MountPath, filepath.Join(root, "run"))
			if strings.HasPrefix(arg, "-http-address=") {
				arg = "-http-address=" + freeAddr(t)
			}
			return arg
		}
		for _, dir := range []string{"bin", "run"} {
			if err := os.Mkdir(filepath.Join(root, dir), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		installArgs := make([]string, len(install.Args))
		for i, a := range install.Args {
			installArgs[i] = local(a)
		}
		if out, err := exec.Command(bin, installArgs...).CombinedOutput(); err != nil {
			t.Fatalf("the init container %v: %v\n%s", install.Args, err, out)
		}
		app := pod.Spec.Containers[0]
		argv := make([]string, 0, len(app.Command)+len(app.Args))
		for _, a := range append(slices.Clone(app.Command), app.Args...) {
			argv = append(argv, local(a))
		}
		pods[name] = startProc(t, 3072, proc.Options{Name: name, Path: argv[0], Args: argv[1:],
			Env: []string{"KUBECONFIG=" + kubeconfig, "POD_NAME=" + name, "POD_NAMESPACE=" + ns}, Log: filepath.Join(root, "log")})
	}
	var first cmdRun
	waitUntil(t, 3*d.lease+10*time.Second, "one pod to run the app's command", func() bool {
		runs := readRuns(t, journal)
		if len(runs) == 0 {
			return false
		}
		first = runs[len(runs)-1]
		return time.Since(first.last) < time.Second
	})
	at := time.Now()
	if err := pods[first.id].Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var next cmdRun
	waitUntil(t, 3*d.lease+10*time.Second, "the other pod to run it after the SIGTERM", func() bool {
		runs := readRuns(t, journal)
		next = runs[len(runs)-1]
		return next.id != first.id && next.start.After(at)
	})
	runs := readRuns(t, journal)
	t.Logf("%s ran the app's command, then %s, %v after %s's SIGTERM", first.id, next.id, next.start.Sub(at).Round(time.Millisecond), first.id)
	if o := cmdOverlaps(runs); len(o) > 0 {
		t.Errorf("the app's command ran in two pods at once:\n  %s", strings.Join(o, "\n  "))
	}
}
