package demo

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// proc is one process the demo runs.
type proc struct {
	name   string
	cmd    *exec.Cmd
	log    string
	exited chan struct{}
}

// procs runs the demo's processes and stops every one of them.
type procs struct {
	dir string // logs

	mu      sync.Mutex
	all     []*proc
	started []int // every pid, kept after stopAll
}

// start runs bin with args and env added to the demo's environment; its
// stderr goes to a log file in dir, and each stdout line to onLine (or to
// the log when onLine is nil). Each process dies with the demo
// (Pdeathsig), even if the demo is killed.
func (ps *procs) start(name, bin string, args, env []string, onLine func(string)) (*proc, error) {
	p := &proc{name: name, log: filepath.Join(ps.dir, name+".log"), exited: make(chan struct{})}
	logFile, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stderr = logFile
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stdout io.ReadCloser
	if onLine == nil {
		p.cmd.Stdout = logFile
	} else if stdout, err = p.cmd.StdoutPipe(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("demo: %w", err)
	}
	if err := p.cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("demo: start %s: %w", name, err)
	}
	go func() {
		if stdout != nil {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				onLine(sc.Text())
			}
		}
		_ = p.cmd.Wait()
		_ = logFile.Close()
		close(p.exited)
	}()
	ps.mu.Lock()
	ps.all = append(ps.all, p)
	ps.started = append(ps.started, p.cmd.Process.Pid)
	ps.mu.Unlock()
	return p, nil
}

// alive reports whether p has not exited.
func (p *proc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and waits up to grace for p to exit, then kills it.
func (p *proc) stop(grace time.Duration) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// stopAll stops every process, the most recently started first.
func (ps *procs) stopAll(grace time.Duration) {
	ps.mu.Lock()
	all := ps.all
	ps.all = nil
	ps.mu.Unlock()
	for i := len(all) - 1; i >= 0; i-- {
		all[i].stop(grace)
	}
}

// pids returns the pid of every process ever started.
func (ps *procs) pids() []int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return append([]int(nil), ps.started...)
}
