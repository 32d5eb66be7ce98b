package proc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// sh starts /bin/sh -c script, with its output in the test's directory,
// and kills it when the test ends.
func sh(t *testing.T, script string, o Options) *Process {
	t.Helper()
	o.Name, o.Path, o.Args = "sh", "/bin/sh", []string{"-c", script}
	if o.Log == "" {
		o.Log = filepath.Join(t.TempDir(), "sh.log")
	}
	p, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Kill(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// collect gathers lines from a callback.
type collect struct {
	mu    sync.Mutex
	lines []string
}

func (c *collect) add(line string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines = append(c.lines, line)
}

func (c *collect) get() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.lines...)
}

// has is a WaitReady condition: some line has been seen.
func (c *collect) has(line string) func(context.Context) (bool, error) {
	return func(context.Context) (bool, error) {
		for _, l := range c.get() {
			if l == line {
				return true, nil
			}
		}
		return false, nil
	}
}

func exit(t *testing.T, p *Process) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return p.Wait(ctx)
}

// gone reports whether pid no longer runs: no such process, or a zombie
// that nobody has reaped yet.
func gone(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	return processState(stat) == "Z"
}

// processState is the state field of /proc/<pid>/stat: R, S, T, Z...
func processState(stat []byte) string {
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && len(s) > i+2 {
		return s[i+2 : i+3]
	}
	return ""
}

func state(pid int) string {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "gone"
	}
	return processState(stat)
}

func TestOutputGoesToTheLogAndEveryLineToItsCallbackBeforeDone(t *testing.T) {
	var out, errs collect
	log := filepath.Join(t.TempDir(), "out.log")
	p := sh(t, `echo one; echo two >&2; echo three; printf last`, Options{Log: log, Stdout: out.add, Stderr: errs.add})
	if err := exit(t, p); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(out.get(), "|"), "one|three|last"; got != want {
		t.Errorf("stdout lines %q, want %q", got, want)
	}
	if got, want := strings.Join(errs.get(), "|"), "two"; got != want {
		t.Errorf("stderr lines %q, want %q", got, want)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"one\n", "two\n", "three\n", "last"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the log %q lacks %q", b, want)
		}
	}
}

func TestOutputWithoutCallbacksGoesToTheLogAppended(t *testing.T) {
	log := filepath.Join(t.TempDir(), "out.log")
	for _, word := range []string{"first", "second"} {
		if err := exit(t, sh(t, "echo "+word+"; echo "+word+"-err >&2", Options{Log: log})); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), "first\nfirst-err\nsecond\nsecond-err\n"; got != want {
		t.Errorf("log %q, want %q", got, want)
	}
}

func TestEnvIsAddedToTheParentsEnvironment(t *testing.T) {
	t.Setenv("PROC_TEST_INHERITED", "from-parent")
	var out collect
	p := sh(t, `echo "$PROC_TEST_INHERITED $PROC_TEST_ADDED"`, Options{Env: []string{"PROC_TEST_ADDED=added"}, Stdout: out.add})
	if err := exit(t, p); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(out.get(), "|"); got != "from-parent added" {
		t.Errorf("the child saw %q, want %q", got, "from-parent added")
	}
}

func TestWaitReportsTheExitStatusWithTheLogsEnd(t *testing.T) {
	err := exit(t, sh(t, `echo why it failed >&2; exit 3`, Options{}))
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("Wait: %v, want exit status 3", err)
	}
	if !strings.Contains(err.Error(), "why it failed") {
		t.Errorf("Wait's error %q lacks the log's end", err)
	}
}

func TestWaitReturnsWhenItsContextEndsAndTheProcessRuns(t *testing.T) {
	p := sh(t, `exec sleep 30`, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := p.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait: %v, want the context's deadline", err)
	}
	if p.Exited() {
		t.Error("the process exited; Wait must not stop it")
	}
}

func TestStopEndsAProcessThatHandlesSIGTERMWithItsStatus(t *testing.T) {
	var out collect
	p := sh(t, `trap 'echo bye; exit 0' TERM; echo ready; while :; do sleep 0.01; done`, Options{Stdout: out.add})
	if err := p.WaitReady(context.Background(), 10*time.Second, out.has("ready")); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(10 * time.Second); err != nil {
		t.Fatalf("Stop: %v, want the clean exit", err)
	}
	if !p.Exited() || !slices.Contains(out.get(), "bye") {
		t.Errorf("exited %v, lines %q; want exited after its trap printed bye", p.Exited(), out.get())
	}
}

func TestStopKillsAProcessThatIgnoresSIGTERMAfterTheGrace(t *testing.T) {
	var out collect
	p := sh(t, `trap '' TERM; echo ready; while :; do sleep 0.01; done`, Options{Stdout: out.add})
	if err := p.WaitReady(context.Background(), 10*time.Second, out.has("ready")); err != nil {
		t.Fatal(err)
	}
	const grace = 300 * time.Millisecond
	start := time.Now()
	err := p.Stop(grace)
	if took := time.Since(start); !errors.Is(err, ErrKilled) || took < grace {
		t.Fatalf("Stop after %v: %v, want ErrKilled after the grace of %v", took, err, grace)
	}
	if !p.Exited() {
		t.Error("Stop returned with the process running")
	}
}

func TestStopEndsAPausedProcess(t *testing.T) {
	p := sh(t, `exec sleep 30`, Options{})
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitReady(context.Background(), 10*time.Second, func(context.Context) (bool, error) {
		return state(p.Pid()) == "T", nil
	}); err != nil {
		t.Fatal(err)
	}
	err := p.Stop(10 * time.Second)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Fatalf("Stop: %v, want an exit by SIGTERM (not a kill after the grace)", err)
	}
}

func TestSignalsReachTheWholeGroup(t *testing.T) {
	var out collect
	p := sh(t, `sleep 30 & echo $!; wait`, Options{Stdout: out.add})
	var child int
	if err := p.WaitReady(context.Background(), 10*time.Second, func(context.Context) (bool, error) {
		lines := out.get()
		if len(lines) == 0 {
			return false, nil
		}
		var err error
		child, err = strconv.Atoi(lines[0])
		return err == nil, err
	}); err != nil {
		t.Fatal(err)
	}
	inState := func(want string) func(context.Context) (bool, error) {
		return func(context.Context) (bool, error) { return state(child) == want, nil }
	}
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitReady(context.Background(), 10*time.Second, inState("T")); err != nil {
		t.Fatalf("the shell's child after SIGSTOP: %v", err)
	}
	if err := p.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitReady(context.Background(), 10*time.Second, inState("S")); err != nil {
		t.Fatalf("the shell's child after SIGCONT: %v", err)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if !p.Exited() {
		t.Fatal("Kill returned with the process running")
	}
	if err := pollGone(child); err != nil {
		t.Errorf("the shell's child after Kill: %v", err)
	}
	if err := p.Signal(syscall.SIGCONT); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("Signal after exit: %v, want os.ErrProcessDone", err)
	}
}

// pollGone waits up to 10s for pid to be gone.
func pollGone(pid int) error {
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return gone(pid), nil
	})
	if err != nil {
		return fmt.Errorf("process %d still %s: %w", pid, state(pid), err)
	}
	return nil
}

func TestWaitReady(t *testing.T) {
	t.Run("returns once the condition holds", func(t *testing.T) {
		var out collect
		p := sh(t, `sleep 0.2; echo up; exec sleep 30`, Options{Stdout: out.add})
		if err := p.WaitReady(context.Background(), 10*time.Second, out.has("up")); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(out.get(), "up") {
			t.Error("WaitReady returned before the condition held")
		}
	})
	t.Run("fails at once when the process exits", func(t *testing.T) {
		p := sh(t, `echo cannot start >&2; exit 1`, Options{})
		start := time.Now()
		err := p.WaitReady(context.Background(), time.Minute, func(context.Context) (bool, error) { return false, nil })
		if !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "cannot start") {
			t.Fatalf("WaitReady: %v, want ErrExited with the log's end", err)
		}
		if took := time.Since(start); took > 30*time.Second {
			t.Errorf("WaitReady took %v, want it to notice the exit, not wait out the timeout", took)
		}
	})
	t.Run("fails after the timeout and leaves the process running", func(t *testing.T) {
		p := sh(t, `exec sleep 30`, Options{})
		err := p.WaitReady(context.Background(), 100*time.Millisecond, func(context.Context) (bool, error) { return false, nil })
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("WaitReady: %v, want the deadline", err)
		}
		if p.Exited() {
			t.Error("WaitReady stopped the process")
		}
	})
	t.Run("fails with the condition's error", func(t *testing.T) {
		p := sh(t, `exec sleep 30`, Options{})
		boom := errors.New("boom")
		if err := p.WaitReady(context.Background(), time.Minute, func(context.Context) (bool, error) { return false, boom }); !errors.Is(err, boom) {
			t.Fatalf("WaitReady: %v, want %v", err, boom)
		}
	})
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	if err := Run(context.Background(), Options{Name: "true", Path: "true", Log: filepath.Join(dir, "true.log")}); err != nil {
		t.Errorf("Run true: %v", err)
	}
	err := Run(context.Background(), Options{Name: "sh", Path: "/bin/sh", Args: []string{"-c", "echo no such thing >&2; exit 2"}, Log: filepath.Join(dir, "sh.log")})
	if err == nil || !strings.Contains(err.Error(), "no such thing") {
		t.Errorf("Run of a failing command: %v, want its exit with its output", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := Run(ctx, Options{Name: "sleep", Path: "sleep", Args: []string{"30"}, Log: filepath.Join(dir, "sleep.log")}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Run past its context: %v, want the deadline", err)
	}
}

func TestStartFailsWithoutALogOrAProgram(t *testing.T) {
	if _, err := Start(Options{Name: "x", Path: "true"}); err == nil {
		t.Error("Start without a log: no error")
	}
	if _, err := Start(Options{Name: "x", Path: "/no/such/program", Log: filepath.Join(t.TempDir(), "x.log")}); err == nil {
		t.Error("Start of a missing program: no error")
	}
}

func TestLogTailIsTheEndOfTheLog(t *testing.T) {
	p := sh(t, `echo 0123456789`, Options{})
	if err := exit(t, p); err != nil {
		t.Fatal(err)
	}
	if got := p.LogTail(4); got != "789\n" {
		t.Errorf("LogTail(4) = %q, want %q", got, "789\n")
	}
	if got := p.LogTail(100); got != "0123456789\n" {
		t.Errorf("LogTail(100) = %q, want the whole log", got)
	}
}

func TestFreePortCanBeListenedOn(t *testing.T) {
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("listen on the free port %d: %v", port, err)
	}
	_ = l.Close()
}

// A child dies with the process that started it, even by SIGKILL: the
// test runs itself as a parent that starts `sleep`, and kills that parent.
func TestChildDiesWithItsParent(t *testing.T) {
	var out collect
	parent, err := Start(Options{Name: "parent", Path: os.Args[0], Args: []string{"-test.run=^$"},
		Env: []string{"PROC_TEST_PARENT=" + t.TempDir()}, Log: filepath.Join(t.TempDir(), "parent.log"), Stdout: out.add})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = parent.Kill() })
	var child int
	if err := parent.WaitReady(context.Background(), 30*time.Second, func(context.Context) (bool, error) {
		for _, l := range out.get() {
			if pid, ok := strings.CutPrefix(l, "CHILD "); ok {
				child, err = strconv.Atoi(pid)
				return err == nil, err
			}
		}
		return false, nil
	}); err != nil {
		t.Fatal(err)
	}
	if gone(child) {
		t.Fatalf("the child %d is not running before its parent dies", child)
	}
	if err := parent.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := pollGone(child); err != nil {
		t.Errorf("after its parent's SIGKILL: %v", err)
	}
}

func TestMain(m *testing.M) {
	if dir := os.Getenv("PROC_TEST_PARENT"); dir != "" {
		p, err := Start(Options{Name: "sleep", Path: "sleep", Args: []string{"60"}, Log: filepath.Join(dir, "sleep.log")})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("CHILD %d\n", p.Pid())
		<-p.Done() // until the test kills this process
		os.Exit(1)
	}
	os.Exit(m.Run())
}
