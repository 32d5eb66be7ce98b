package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// Options says what to run.
type Options struct {
	// Name names the process in errors.
	Name string
	// Path is the program, found on PATH when it has no slash.
	Path string
	// Args are its arguments.
	Args []string
	// Env is added to this process's environment; a later entry wins.
	Env []string
	// Log is the file that stdout and stderr are appended to, created
	// when missing. Required.
	Log string
	// Stdout, when set, also receives each line of stdout, without its
	// newline, in order. Stderr likewise.
	Stdout, Stderr func(line string)
}

// Process is a running (or exited) child process.
type Process struct {
	name string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // how it exited; read after done is closed
}

// Start starts the program o describes and returns once it runs; it does
// not wait for it to be ready (WaitReady does).
func Start(o Options) (*Process, error) {
	if o.Log == "" {
		return nil, fmt.Errorf("proc: %s: no log file", o.Name)
	}
	logFile, err := os.OpenFile(o.Log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("proc: %s: %w", o.Name, err)
	}
	cmd := exec.Command(o.Path, o.Args...)
	cmd.Env = append(os.Environ(), o.Env...)
	stdout, stderr := newLines(logFile, o.Stdout), newLines(logFile, o.Stderr)
	cmd.Stdout, cmd.Stderr = stdout.writer(), stderr.writer()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("proc: start %s: %w", o.Name, err)
	}
	p := &Process{name: o.Name, log: o.Log, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait() // returns once both streams are copied
		stdout.flush()
		stderr.flush()
		if err := logFile.Close(); err != nil && p.err == nil {
			p.err = fmt.Errorf("proc: %s: log: %w", o.Name, err)
		}
		close(p.done)
	}()
	return p, nil
}

// Run starts the program o describes and waits for it to exit. It returns
// nil when it exits with status 0; otherwise an error with the end of its
// log. When ctx ends first, the process is killed.
func Run(ctx context.Context, o Options) error {
	p, err := Start(o)
	if err != nil {
		return err
	}
	if err := p.Wait(ctx); err != nil {
		return errors.Join(err, p.Kill())
	}
	return nil
}

// Pid is the process's id, which is also its process group's.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Name is the name it was started with.
func (p *Process) Name() string { return p.name }

// Done is closed once the process has exited and all its output is
// delivered.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether Done is closed.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Wait waits for the process to exit and returns how it did: nil for
// status 0, else an error wrapping the *exec.ExitError, with the end of the
// log. It returns ctx's error, the process still running, if ctx ends
// first.
func (p *Process) Wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.exitErr()
	case <-ctx.Done():
		return fmt.Errorf("proc: waiting for %s to exit: %w", p.name, ctx.Err())
	}
}

// exitErr describes how the process exited; done is closed.
func (p *Process) exitErr() error {
	if p.err == nil {
		return nil
	}
	return fmt.Errorf("proc: %s: %w; the end of its log:\n%s", p.name, p.err, p.LogTail(2048))
}
