package agent

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	testingclock "k8s.io/utils/clock/testing"
)

// fakeMono is a monotonic clock that clk drives, an hour ahead of its
// start (so that "0" is long past).
func fakeMono(clk *testingclock.FakeClock) func() time.Duration {
	base := clk.Now()
	return func() time.Duration { return clk.Since(base) + time.Hour }
}

// validFor is the line that makes leadership valid for d from now.
func validFor(mono func() time.Duration, d time.Duration) string {
	return strconv.FormatInt(int64(mono()+d), 10)
}

// guard is a Guard under test: its clock, monotonic clock, stdin and the
// channel that gets its exit code.
type guard struct {
	clk   *testingclock.FakeClock
	mono  func() time.Duration
	w     io.WriteCloser
	codes <-chan int
}

// guarded runs Guard on the shell script script on a fake clock and sends
// it a first line, valid for valid; with started set, it waits until that
// file exists (the script got that far).
func guarded(t *testing.T, script string, valid time.Duration, started string) guard {
	t.Helper()
	clk := testingclock.NewFakeClock(time.Now())
	g := guard{clk: clk, mono: fakeMono(clk)}
	r, w := io.Pipe()
	codes := make(chan int, 1)
	go func() {
		code, err := Guard(context.Background(), []string{"-grace=2s", "--", "sh", "-c", script}, r, clk, g.mono)
		if err != nil {
			t.Error(err)
		}
		codes <- code
	}()
	t.Cleanup(func() { _ = w.Close() })
	g.w, g.codes = w, codes
	send(t, w, validFor(g.mono, valid))
	if started != "" {
		waitFile(t, started)
	}
	return g
}

// send writes line to the guard, failing t if the guard does not read it.
func send(t *testing.T, w io.Writer, line string) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := io.WriteString(w, line+"\n")
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the guard did not read %q", line)
	}
}

// waitFile waits until path exists (the script got that far).
func waitFile(t *testing.T, path string) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, err := os.Stat(path)
		return err == nil, nil
	}); err != nil {
		t.Fatalf("%s never appeared", path)
	}
}

func exited(t *testing.T, codes <-chan int, what string) int {
	t.Helper()
	select {
	case c := <-codes:
		return c
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the guard did not return", what)
		return 0
	}
}

// running reports whether the guard has not returned yet.
func running(codes <-chan int) bool {
	select {
	case <-codes:
		return false
	default:
		return true
	}
}

// trapScript notes its start in dir/started, and its SIGTERM in
// dir/term before it exits 3.
func trapScript(dir string) string {
	return `trap 'echo term > ` + filepath.Join(dir, "term") + `; exit 3' TERM; echo up > ` + filepath.Join(dir, "started") + `; while :; do sleep 0.05; done`
}

func TestGuardReturnsTheCommandsExitCode(t *testing.T) {
	g := guarded(t, "exit 7", 5*time.Second, "")
	if c := exited(t, g.codes, "a command that exits"); c != 7 {
		t.Fatalf("exit code %d, want 7", c)
	}
}

func TestGuardStopsTheCommandOnceLeadershipRunsOut(t *testing.T) {
	dir := t.TempDir()
	g := guarded(t, trapScript(dir), time.Second, filepath.Join(dir, "started"))
	clk, codes := g.clk, g.codes
	// (That renewals extend it is the e2e test's: here a step of the
	// clock could overtake the guard's reading of the extension.)
	clk.Step(999 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(dir, "term")); err == nil || !running(codes) {
		t.Fatal("the command was stopped before its deadline")
	}
	// At the deadline, SIGTERM.
	clk.Step(time.Millisecond)
	if c := exited(t, codes, "past the deadline"); c != 3 {
		t.Fatalf("exit code %d, want the script's 3 after SIGTERM", c)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "term")); err != nil || strings.TrimSpace(string(b)) != "term" {
		t.Fatalf("the script saw no SIGTERM: %q %v", b, err)
	}
}

func TestGuardKillsACommandThatOutlivesTheGrace(t *testing.T) {
	dir := t.TempDir()
	g := guarded(t, `trap '' TERM; echo up > `+filepath.Join(dir, "started")+`; while :; do sleep 0.05; done`, 5*time.Second, filepath.Join(dir, "started"))
	clk, codes := g.clk, g.codes
	send(t, g.w, guardStop)
	// The grace timer is set once the stop was taken; step past it until
	// the guard kills the command.
	var code int
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		select {
		case code = <-codes:
			return true, nil
		default:
			clk.Step(time.Second)
			return false, nil
		}
	}); err != nil {
		t.Fatal("the guard never killed a command that ignores SIGTERM")
	}
	if code != 137 {
		t.Fatalf("exit code %d, want 137 (SIGKILL)", code)
	}
}

func TestGuardStopsTheCommandWhenTheAgentIsGone(t *testing.T) {
	dir := t.TempDir()
	g := guarded(t, trapScript(dir), 5*time.Second, filepath.Join(dir, "started"))
	_ = g.w.Close() // the agent died: its end of the pipe closed
	if c := exited(t, g.codes, "after the agent went"); c != 3 {
		t.Fatalf("exit code %d, want 3 after SIGTERM", c)
	}
}

func TestGuardStartsNothingWithoutLeadership(t *testing.T) {
	dir := t.TempDir()
	r, w := io.Pipe()
	_ = w.Close()
	clk := testingclock.NewFakeClock(time.Now())
	_, err := Guard(context.Background(), []string{"--", "sh", "-c", trapScript(dir)}, r, clk, fakeMono(clk))
	if err == nil || !strings.Contains(err.Error(), "no leadership") {
		t.Fatalf("Guard with no validity given: %v; want an error", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "started")); err == nil {
		t.Fatal("the command started without leadership")
	}
}

// A line that names an instant already past (written late, by an agent
// paused after it read its state) extends nothing: the guard stops CMD.
func TestGuardStopsTheCommandOnALateLine(t *testing.T) {
	dir := t.TempDir()
	g := guarded(t, trapScript(dir), 5*time.Second, filepath.Join(dir, "started"))
	send(t, g.w, validFor(g.mono, -time.Millisecond))
	if c := exited(t, g.codes, "after a late line"); c != 3 {
		t.Fatalf("exit code %d, want 3 after SIGTERM", c)
	}
}

// The stop reaches what CMD started: a shell's child, which ignores
// SIGTERM, goes with the SIGKILL after the grace.
func TestGuardStopsWhatTheCommandStarted(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child")
	// Written whole, then renamed: the file appears with the pid in it.
	g := guarded(t, `sh -c 'trap "" TERM; echo $$ > `+pidFile+`.tmp; mv `+pidFile+`.tmp `+pidFile+`; while :; do sleep 0.05; done' & wait`, 5*time.Second, pidFile)
	clk, codes := g.clk, g.codes
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	send(t, g.w, guardStop)
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		select {
		case <-codes:
			return true, nil
		default:
			clk.Step(time.Second)
			return false, nil
		}
	}); err != nil {
		t.Fatal("the guard did not return")
	}
	// Gone, or a zombie awaiting its reaper: not running either way.
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", child))
		return err != nil || strings.Contains(string(stat), ") Z "), nil
	}); err != nil {
		t.Fatalf("the command's child %d still runs after the stop", child)
	}
}
