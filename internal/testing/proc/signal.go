package proc

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// ErrKilled means a process did not exit within its grace period after
// SIGTERM, so Stop killed it.
var ErrKilled = errors.New("proc: killed after the grace period")

// Signal sends sig to the process's group: SIGSTOP pauses it and SIGCONT
// resumes it, as a frozen node would be. It returns os.ErrProcessDone once
// the process has exited.
func (p *Process) Signal(sig syscall.Signal) error {
	if p.Exited() {
		return os.ErrProcessDone
	}
	if err := syscall.Kill(-p.Pid(), sig); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		}
		return fmt.Errorf("proc: %v to %s: %w", sig, p.name, err)
	}
	return nil
}

// Kill sends SIGKILL to the process's group and waits until the process
// has exited, paused or not. Killing an exited process does nothing.
func (p *Process) Kill() error {
	if err := p.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	<-p.done
	return nil
}

// Stop sends SIGTERM (and SIGCONT, so that a paused process handles it)
// and waits up to grace for the process to exit, then kills it. It returns
// how the process exited, as Wait does, or an error wrapping ErrKilled; in
// either case the process has exited.
func (p *Process) Stop(grace time.Duration) error {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGCONT} {
		if err := p.Signal(sig); errors.Is(err, os.ErrProcessDone) {
			break
		} else if err != nil {
			return errors.Join(err, p.Kill())
		}
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return p.exitErr()
	case <-t.C:
		if err := p.Kill(); err != nil {
			return err
		}
		return fmt.Errorf("proc: %s still running %v after SIGTERM: %w", p.name, grace, ErrKilled)
	}
}
