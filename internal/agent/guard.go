package agent

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/utils/clock"
)

// GuardCommand is the hidden subcommand the agent runs CMD under:
// `redislock agent-guard -grace D -- CMD ARGS...`.
const GuardCommand = "agent-guard"

// guardStop is the line that asks the guard to stop CMD.
const guardStop = "stop"

// Guard runs CMD for as long as the agent says leadership is valid, and
// stops it (SIGTERM, then SIGKILL after the grace period, to CMD's whole
// process group) when it is not, whether or not the agent can still say
// so. It is a process of its own, so that an agent that hangs (SIGSTOP, a
// stuck runtime) or dies cannot leave CMD running past the lock's
// validity: the guard keeps the deadline itself.
//
// The agent writes one line per extension to the guard's stdin: the
// instant leadership stays valid until, on mono (CLOCK_MONOTONIC, which
// every process of the host shares), in ns. An absolute instant, so that a
// line written late (the agent paused between reading its state and
// writing) extends nothing. "stop" asks for a stop at once, as do a
// deadline already past, the end of stdin (the agent died) and the end of
// ctx (SIGTERM). CMD starts only after a first line still in the future.
// The guard exits with CMD's exit code (128+signal when a signal ended
// it).
func Guard(ctx context.Context, args []string, in io.Reader, clk clock.Clock, mono func() time.Duration) (int, error) {
	fs := flag.NewFlagSet(GuardCommand, flag.ContinueOnError)
	grace := fs.Duration("grace", time.Second, "time CMD has after SIGTERM before SIGKILL")
	if err := fs.Parse(args); err != nil {
		return 2, err
	}
	argv := fs.Args()
	if len(argv) == 0 {
		return 2, fmt.Errorf("%s: no command after --", GuardCommand)
	}
	lines := readLines(in)
	// left is how long until the instant a line names, 0 or less when it
	// is past or is no instant.
	left := func(line string) time.Duration {
		until, err := strconv.ParseInt(line, 10, 64)
		if err != nil {
			return 0
		}
		return time.Duration(until) - mono()
	}
	first, ok := <-lines
	valid := left(first)
	if !ok || valid <= 0 {
		return 1, fmt.Errorf("%s: no leadership to start %s under (first line %q)", GuardCommand, argv[0], first)
	}
	deadline := clk.NewTimer(valid)
	defer deadline.Stop()
	g, err := startGroup(argv)
	if err != nil {
		return 1, fmt.Errorf("%s: start %s: %w", GuardCommand, argv[0], err)
	}
	if !holdUntilStop(ctx, g, lines, deadline, left) {
		g.signal(syscall.SIGKILL) // what CMD left behind
		return exitCode(g.cmd.ProcessState), nil
	}
	g.signal(syscall.SIGTERM)
	kill := clk.NewTimer(*grace)
	defer kill.Stop()
	select {
	case <-g.exited:
	case <-kill.C():
	}
	g.signal(syscall.SIGKILL)
	<-g.exited
	return exitCode(g.cmd.ProcessState), nil
}

// readLines sends each line of in, and closes the channel at its end.
func readLines(in io.Reader) <-chan string {
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines
}

// processGroup is CMD, leading a process group of its own.
type processGroup struct {
	cmd *exec.Cmd
	// exited is closed once CMD has exited.
	exited chan struct{}
}

// startGroup starts argv so that it dies with the guard and leads a
// process group of its own, so that a stop reaches what it started too (a
// shell's children).
func startGroup(argv []string) (*processGroup, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	g := &processGroup{cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // the exit status is read from cmd.ProcessState
		close(g.exited)
	}()
	return g, nil
}

// signal sends sig to the whole group.
func (g *processGroup) signal(sig syscall.Signal) { _ = syscall.Kill(-g.cmd.Process.Pid, sig) }

// holdUntilStop moves deadline to each instant read from lines until CMD
// must stop: at the deadline, at a stop line, a line that is no future
// instant or the end of lines, or when ctx ends; it returns true then, and
// false when CMD exited first.
func holdUntilStop(ctx context.Context, g *processGroup, lines <-chan string, deadline clock.Timer, left func(string) time.Duration) bool {
	for {
		select {
		case <-g.exited:
			return false
		case line, ok := <-lines:
			d := left(line)
			if !ok || line == guardStop || d <= 0 {
				return true
			}
			deadline.Stop()
			deadline.Reset(d)
		case <-deadline.C():
			return true
		case <-ctx.Done():
			return true
		}
	}
}

// Monotonic reads CLOCK_MONOTONIC, the clock the agent and its guard
// share for Guard's deadlines.
func Monotonic() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(fmt.Sprintf("agent: CLOCK_MONOTONIC: %v", err)) // Linux always has it
	}
	return time.Duration(ts.Nano())
}

// exitCode is a process's exit code as a shell gives it: 128+signal for
// a process a signal ended.
func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// ExitError is the error of an agent that ran CMD: CMD's exit code, for
// the agent to exit with.
type ExitError struct {
	Code   int
	Reason string
}

func (e *ExitError) Error() string { return fmt.Sprintf("%s (exit code %d)", e.Reason, e.Code) }
