// Package demo shows leader election on a local Redis: candidate processes
// elect one leader, and the demo kills the leader and times the handover.
package demo

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock/redislock/internal/redisproc"
	"github.com/redislock/redislock/pkg/redislock"
)

const lockName = "demo/leader"

// Run runs the demo with the command-line arguments args and writes its
// account to out. It stops every process it started before it returns.
func Run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	n := fs.Int("candidates", 3, "number of candidate processes")
	ttl := fs.Duration("ttl", 2*time.Second, "lock TTL: how long a crashed leader keeps the lock")
	keep := fs.Bool("keep", false, "keep running after the handovers, until interrupted")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n < 2 {
		return fmt.Errorf("demo: -candidates %d: need at least 2 for a handover", *n)
	}
	start := time.Now()
	say := func(format string, a ...any) {
		_, _ = fmt.Fprintf(out, "%6.2fs  %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, a...))
	}

	server, err := redisproc.Start(redisproc.Options{})
	if err != nil {
		return err
	}
	defer server.Stop()
	say("redis-server %s listening on %s", redisVersion(), server.Addr)

	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	procs := map[string]*exec.Cmd{}
	defer func() {
		for _, p := range procs {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	}()
	for i := 0; i < *n; i++ {
		id := "candidate-" + strconv.Itoa(i)
		p, err := startCandidate(self, id, server.Addr, *ttl, out, say)
		if err != nil {
			return err
		}
		procs[id] = p
	}
	say("started %d candidates for lock %q, ttl %v", *n, lockName, *ttl)
	say("this Redis just started, so the restart guard grants the lock once it has been up for the ttl")

	rc := server.Client()
	defer func() { _ = rc.Close() }()
	observer, err := redislock.New([]redis.UniversalClient{rc}, &redislock.Options{Identity: "demo-observer"})
	if err != nil {
		return err
	}
	watch := func(not string) (redislock.Holder, error) {
		return waitLeader(ctx, observer, not, 4**ttl)
	}

	h, err := watch("")
	if err != nil {
		return err
	}
	say("LEADER %s (fence %d)", h.Identity, h.Fence)

	killed := time.Now()
	say("kill -9 %s: a crash, so the lock must expire (ttl %v)", h.Identity, *ttl)
	if err := procs[h.Identity].Process.Kill(); err != nil {
		return err
	}
	_ = procs[h.Identity].Wait()
	delete(procs, h.Identity)
	next, err := watch(h.Identity)
	if err != nil {
		return err
	}
	crash := time.Since(killed)
	say("LEADER %s (fence %d): failover took %v", next.Identity, next.Fence, crash.Round(time.Millisecond))

	termed := time.Now()
	say("SIGTERM %s: a graceful stop, so it releases the lock", next.Identity)
	if err := procs[next.Identity].Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	third, err := watch(next.Identity)
	if err != nil {
		return err
	}
	handover := time.Since(termed)
	say("LEADER %s (fence %d): handover took %v", third.Identity, third.Fence, handover.Round(time.Millisecond))
	_ = procs[next.Identity].Wait()
	delete(procs, next.Identity)

	_, _ = fmt.Fprintf(out, "\nsummary: failover after a crash %v (ttl %v); handover after a graceful stop %v\n",
		crash.Round(time.Millisecond), *ttl, handover.Round(time.Millisecond))
	if !*keep {
		return nil
	}
	say("running until interrupted (Ctrl-C)")
	<-ctx.Done()
	return nil
}

// waitLeader polls the lock until a holder other than not leads.
func waitLeader(ctx context.Context, c *redislock.Client, not string, timeout time.Duration) (redislock.Holder, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		h, err := c.Inspect(ctx, lockName)
		if err == nil && h.Identity != "" && h.Identity != not {
			return h, nil
		}
		select {
		case <-ctx.Done():
			return h, fmt.Errorf("demo: no new leader within %v (last: %+v, %w)", timeout, h, err)
		case <-tick.C:
		}
	}
}

// startCandidate starts one candidate process and copies its output, each
// line prefixed with its id.
func startCandidate(self, id, addr string, ttl time.Duration, out io.Writer, say func(string, ...any)) (*exec.Cmd, error) {
	cmd := exec.Command(self, "candidate", "-id", id, "-addr", addr, "-ttl", ttl.String())
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("demo: start %s: %w", id, err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			say("  [%s] %s", id, sc.Text())
		}
	}()
	return cmd, nil
}

// redisVersion returns the "v=7.0.15" part of redis-server --version.
func redisVersion() string {
	b, err := exec.Command("redis-server", "--version").Output()
	if err != nil {
		return "(version unknown)"
	}
	for _, f := range strings.Fields(string(b)) {
		if strings.HasPrefix(f, "v=") {
			return f[2:]
		}
	}
	return "(version unknown)"
}

// Candidate campaigns for the demo lock until SIGTERM, then releases it.
func Candidate(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("candidate", flag.ContinueOnError)
	id := fs.String("id", "", "identity")
	addr := fs.String("addr", "", "redis address")
	ttl := fs.Duration("ttl", 2*time.Second, "lock TTL")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rc := redis.NewClient(&redis.Options{Addr: *addr, ContextTimeoutEnabled: true})
	defer func() { _ = rc.Close() }()
	c, err := redislock.New([]redis.UniversalClient{rc}, &redislock.Options{Identity: *id})
	if err != nil {
		return err
	}
	e, err := c.NewElector(redislock.ElectorOptions{
		Name:   lockName,
		Timing: redislock.Timing{TTL: *ttl},
		OnStartedLeading: func(_ context.Context, l *redislock.Lock) {
			_, _ = fmt.Fprintf(out, "started leading (fence %d)\n", l.Fence())
		},
		OnStoppedLeading: func() { _, _ = fmt.Fprintln(out, "stopped leading; releasing") },
		OnNewLeader: func(who string) {
			if who != *id {
				_, _ = fmt.Fprintf(out, "follows %s\n", who)
			}
		},
	})
	if err != nil {
		return err
	}
	if err := e.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
