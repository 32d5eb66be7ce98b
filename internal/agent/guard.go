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

	"k8s.io/utils/clock"
)

// GuardCommand is the hidden subcommand the agent runs CMD under:
// `redislock agent-guard -grace D -- CMD ARGS...`.
const GuardCommand = "agent-guard"

// guardStop is the line that asks the guard to stop CMD.
const guardStop = "stop"

// Guard runs CMD for as long as the agent says leadership is valid, and
// stops it (SIGTERM, then SIGKILL after the grace period) when it is not,
// whether or not the agent can still say so. It is a process of its own,
// so that an agent that hangs (SIGSTOP, a stuck runtime) or dies cannot
// leave CMD running past the lock's validity: the guard keeps the deadline
// itself.
//
// The agent writes one line per renewal to the guard's stdin, the time
// leadership stays valid from now ("1500000000", in ns); "stop" asks for a
// stop at once, as do the end of stdin (the agent died) and the end of ctx
// (SIGTERM). CMD
// starts only after the first line, and is stopped once a deadline passes
// unextended. The guard exits with CMD's exit code (128+signal when a
// signal ended it).
func Guard(ctx context.Context, args []string, in io.Reader, clk clock.Clock) (int, error) {
	fs := flag.NewFlagSet(GuardCommand, flag.ContinueOnError)
	grace := fs.Duration("grace", time.Second, "time CMD has after SIGTERM before SIGKILL")
	if err := fs.Parse(args); err != nil {
		return 2, err
	}
	argv := fs.Args()
	if len(argv) == 0 {
		return 2, fmt.Errorf("%s: no command after --", GuardCommand)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	first, ok := <-lines
	valid, err := strconv.ParseInt(first, 10, 64)
	if !ok || err != nil || valid <= 0 {
		return 1, fmt.Errorf("%s: no leadership to start %s under (first line %q)", GuardCommand, argv[0], first)
	}
	deadline := clk.NewTimer(time.Duration(valid))
	defer deadline.Stop()

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	// CMD dies with the guard, and is in the guard's process group, so a
	// signal to the pod's processes reaches it too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return 1, fmt.Errorf("%s: start %s: %w", GuardCommand, argv[0], err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the exit status is read from cmd.ProcessState
		close(exited)
	}()
	for stopping := false; !stopping; {
		select {
		case <-exited:
			return exitCode(cmd.ProcessState), nil
		case line, ok := <-lines:
			if !ok || line == guardStop {
				stopping = true
				break
			}
			d, err := strconv.ParseInt(line, 10, 64)
			if err != nil {
				stopping = true
				break
			}
			deadline.Stop()
			deadline.Reset(time.Duration(d))
		case <-deadline.C():
			stopping = true
		case <-ctx.Done():
			stopping = true
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	kill := clk.NewTimer(*grace)
	defer kill.Stop()
	select {
	case <-exited:
	case <-kill.C():
		_ = cmd.Process.Kill()
		<-exited
	}
	return exitCode(cmd.ProcessState), nil
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
