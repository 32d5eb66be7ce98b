package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

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
