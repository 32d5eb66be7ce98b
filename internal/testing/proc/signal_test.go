package proc

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
)

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
