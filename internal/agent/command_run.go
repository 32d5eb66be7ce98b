package agent

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/redislock/redislock/pkg/redislock"
)

// What a run-while-leading agent does when it loses leadership.
const (
	// OnLostExit stops CMD and exits, for the container to restart.
	OnLostExit = "exit"
	// OnLostCampaign stops CMD and campaigns again; CMD starts anew at
	// the next term.
	OnLostCampaign = "campaign"
)

// onLostValues are the valid Options.OnLost values.
var onLostValues = sets.New(OnLostExit, OnLostCampaign)

// runner runs Options.Command under a guard (see Guard) for each term
// this agent leads.
type runner struct {
	a      *Agent
	run    context.Context // the agent's campaign
	grace  time.Duration
	every  time.Duration // how often the guard's deadline is extended
	cancel context.CancelFunc
	// terms passes each term from OnStartedLeading, which begins it, to
	// the OnStoppedLeading that follows, which waits for its end: the
	// elector pairs every call of one with a later call of the other.
	terms chan *term
	// result is set once CMD's exit decides the agent's.
	result chan *ExitError
}

// term is one term's run of CMD; done is closed once CMD has stopped.
type term struct{ done chan struct{} }

// newRunner returns a runner for the agent's command on a lock of timing
// t. The grace CMD gets after SIGTERM is half of ttl less renewDeadline:
// CMD is stopped at the step-down deadline plus the grace, so it is gone
// before the lock's key can expire and another pod start its own.
func newRunner(a *Agent, t redislock.Timing, run context.Context, cancel context.CancelFunc) *runner {
	// Extensions come every (renewDeadline - renewInterval)/2: each carries
	// the deadline of a renewal at most a renewInterval old, so the next
	// comes before it passes.
	return &runner{a: a, run: run, grace: (t.TTL - t.RenewDeadline) / 2, every: (t.RenewDeadline - t.RenewInterval) / 2, cancel: cancel,
		terms: make(chan *term, 1), result: make(chan *ExitError, 1)}
}

// lead runs CMD for the term whose leadership context is held, then ends
// the term. It is the elector's OnStartedLeading.
func (r *runner) lead(held context.Context, el *redislock.Elector) {
	t := &term{done: make(chan struct{})}
	r.terms <- t
	defer close(t.done)
	st := el.State()
	if held.Err() != nil || !st.Leading {
		return
	}
	g, err := r.startGuard()
	if err != nil {
		r.finish(1, fmt.Sprintf("cannot run the command: %v", err))
		return
	}
	log := r.a.o.Logger.WithValues("command", r.a.o.Command[0], "fence", st.Fence)
	r.extend(g, st)
	log.Info("command started")
	if r.extendWhileLeading(held, el, g) {
		code := exitCode(g.cmd.ProcessState)
		log.Info("command exited; giving up the lock", "exitCode", code)
		r.finish(code, "the command exited")
		return
	}
	code := r.stopGuard(g)
	log.Info("command stopped", "exitCode", code)
	switch {
	case r.run.Err() != nil:
		// The agent was told to stop (SIGTERM): CMD's code is its own.
		r.finish(code, "stopped")
	case r.a.o.OnLost == OnLostExit:
		// Leadership was lost: never a success, whatever CMD said.
		r.finish(max(code, 1), "leadership ended, so the command was stopped")
	}
}

// guardProc is one term's guard process, which runs CMD.
type guardProc struct {
	cmd *exec.Cmd
	// in takes the guard's deadlines, and its stop.
	in io.WriteCloser
	// exited is closed once the guard has exited.
	exited chan struct{}
}

// startGuard starts the guard of CMD (see Guard), to die with the agent.
func (r *runner) startGuard() (*guardProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := append([]string{GuardCommand, "-grace=" + r.grace.String(), "--"}, r.a.o.Command...)
	cmd := exec.Command(self, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		return nil, err
	}
	g := &guardProc{cmd: cmd, in: in, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // the exit status is read from ProcessState
		close(g.exited)
	}()
	return g, nil
}

// extend gives the guard the deadline of st on the guard's clock: this
// instant plus what is left of the lock's validity by the agent's clock,
// read after it.
func (r *runner) extend(g *guardProc, st redislock.State) {
	until := Monotonic() + st.ValidUntil.Sub(r.a.o.Clock.Now())
	_, _ = io.WriteString(g.in, strconv.FormatInt(int64(until), 10)+"\n") // a dead guard is seen by its exit
}

// extendWhileLeading extends the guard's deadline every r.every until the
// term ends, and reports whether CMD exited of itself while this agent
// led.
func (r *runner) extendWhileLeading(held context.Context, el *redislock.Elector, g *guardProc) bool {
	tick := r.a.o.Clock.NewTimer(r.every)
	defer tick.Stop()
	for {
		select {
		case <-g.exited:
			// Else the guard stopped it at the deadline, before this
			// agent saw leadership end (it was paused).
			return held.Err() == nil && el.State().Leading
		case <-tick.C():
			if st := el.State(); st.Leading {
				r.extend(g, st)
			}
			tick.Reset(r.every)
		case <-held.Done():
			return false
		}
	}
}

// stopGuard tells the guard to stop CMD and returns CMD's exit code. A
// guard that has not stopped CMD by the end of its grace, and half as long
// again, is killed (and CMD by its death signal): still before the lock's
// key can expire, grace being half of what is left after the step-down
// deadline.
func (r *runner) stopGuard(g *guardProc) int {
	_, _ = io.WriteString(g.in, guardStop+"\n")
	_ = g.in.Close()
	kill := r.a.o.Clock.NewTimer(r.grace * 3 / 2)
	defer kill.Stop()
	select {
	case <-g.exited:
	case <-kill.C():
		_ = g.cmd.Process.Kill()
		<-g.exited
	}
	return exitCode(g.cmd.ProcessState)
}

// finish records the agent's exit code, once, and ends its campaign.
func (r *runner) finish(code int, reason string) {
	select {
	case r.result <- &ExitError{Code: code, Reason: reason}:
	default:
	}
	r.cancel()
}

// waitStopped waits until the term OnStartedLeading began has stopped
// CMD. It is the elector's OnStoppedLeading, which the release of the
// lock waits for.
func (r *runner) waitStopped() {
	t := <-r.terms
	<-t.done
}

// exitErr returns the error Run ends with: nil for an exit code of 0.
func (r *runner) exitErr() error {
	select {
	case e := <-r.result:
		if e.Code == 0 {
			return nil
		}
		return e
	default:
		return nil
	}
}
