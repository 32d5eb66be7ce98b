package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock/redislock/internal/testing/proc"
	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/internal/testing/rung"
	"github.com/redislock/redislock/pkg/redislock"
)

// The test binary doubles as a candidate process: with REDISLOCK_CHILD set
// it runs that role against REDISLOCK_ADDR and exits. Children append to a
// journal list in the same Redis, which orders their reports.
func TestMain(m *testing.M) {
	if role := os.Getenv("REDISLOCK_CHILD"); role != "" {
		if err := child(role, os.Getenv("REDISLOCK_ADDR"), os.Getenv("REDISLOCK_ID")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	// The unit rung starts no server: its tests that need one skip.
	if !rung.Servers() {
		os.Exit(m.Run())
	}
	// The examples talk to a server of their own, which persists every
	// write before it answers: hence AssumeDurable in the examples.
	s, err := redisproc.Start(redisproc.Options{Args: []string{"--appendonly", "yes", "--appendfsync", "always"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	exampleAddr = s.Addr
	code := m.Run()
	s.Stop()
	os.Exit(code)
}

const journalKey = "journal"

func child(role, addr, id string) error {
	rc := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer func() { _ = rc.Close() }()
	c, err := redislock.New([]redis.UniversalClient{rc}, &redislock.Options{AssumeDurable: true, Identity: id})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	note := func(format string, args ...any) error {
		return rc.RPush(context.Background(), journalKey, fmt.Sprintf(format, args...)).Err()
	}
	switch role {
	case "lock":
		// Take the lock 50 times, reporting entry and exit while held.
		for n := 0; n < 50; {
			l, err := c.Obtain(ctx, "shared", 10*time.Second)
			if errors.Is(err, redislock.ErrNotObtained) {
				continue
			}
			if err != nil {
				return err
			}
			if err := note("enter %s %d", id, l.Fence()); err != nil {
				return err
			}
			if err := note("exit %s %d", id, l.Fence()); err != nil {
				return err
			}
			if err := l.Release(ctx); err != nil {
				return err
			}
			n++
		}
		return nil
	case "act":
		// Lead, and while leading "act" every 5ms: the journal shows
		// every action with the fence it was taken under.
		e, err := c.NewElector(redislock.ElectorOptions{
			Name:             "actor",
			Timing:           redislock.Timing{TTL: 500 * time.Millisecond, RenewInterval: 50 * time.Millisecond, RenewDeadline: 300 * time.Millisecond},
			OnStartedLeading: func(context.Context, *redislock.Lock) {},
			OnStoppedLeading: func() { _ = note("stop %s", id) },
		})
		if err != nil {
			return err
		}
		go func() { _ = e.Run(ctx) }()
		// While leading, spin instead of sleeping: a process stopped
		// here resumes in this loop, before any timer can fire, which
		// is the moment S1 is about. Each action carries the wall-clock
		// interval [before, after] its leadership check fell in.
		last := time.Now()
		for ctx.Err() == nil {
			before := time.Now().UnixNano()
			st := e.State()
			after := time.Now().UnixNano()
			switch {
			case !st.Leading:
				time.Sleep(5 * time.Millisecond)
			case time.Since(last) >= 5*time.Millisecond:
				last = time.Now()
				if err := note("act %s %d %d %d", id, st.Fence, before, after); err != nil {
					return err
				}
			default:
				runtime.Gosched()
			}
		}
		return nil
	case "elect":
		e, err := c.NewElector(redislock.ElectorOptions{
			Name:   "leader",
			Timing: redislock.Timing{TTL: time.Second, RenewInterval: 100 * time.Millisecond, RenewDeadline: 600 * time.Millisecond},
			OnStartedLeading: func(_ context.Context, l *redislock.Lock) {
				_ = note("lead %s %d", id, l.Fence())
			},
			OnStoppedLeading: func() { _ = note("stop %s", id) },
		})
		if err != nil {
			return err
		}
		return e.Run(ctx)
	}
	return fmt.Errorf("unknown role %q", role)
}

func spawn(t *testing.T, s *redisproc.Server, role, id string) *proc.Process {
	t.Helper()
	cmd, err := proc.Start(proc.Options{Name: role + " " + id, Path: os.Args[0], Args: []string{"-test.run=^$"},
		Env: []string{"REDISLOCK_CHILD=" + role, "REDISLOCK_ADDR=" + s.Addr, "REDISLOCK_ID=" + id}, Log: filepath.Join(t.TempDir(), id+".log")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cmd.Kill(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("%s's output (the end):\n%s", id, cmd.LogTail(4096))
		}
	})
	return cmd
}

func readJournal(t *testing.T, s *redisproc.Server) []string {
	t.Helper()
	rc := s.Client()
	defer func() { _ = rc.Close() }()
	lines, err := rc.LRange(context.Background(), journalKey, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

func TestMutualExclusionAcrossProcesses(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	var cmds []*proc.Process
	for i := 0; i < 3; i++ {
		cmds = append(cmds, spawn(t, s, "lock", fmt.Sprintf("p%d", i)))
	}
	for _, cmd := range cmds {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		err := cmd.Wait(ctx)
		cancel()
		if err != nil {
			t.Fatalf("child: %v", err)
		}
	}
	lines := readJournal(t, s)
	if len(lines) != 300 {
		t.Fatalf("%d journal lines, want 300", len(lines))
	}
	last := int64(0)
	for i := 0; i < len(lines); i += 2 {
		var who, who2 string
		var fence, fence2 int64
		if _, err := fmt.Sscanf(lines[i], "enter %s %d", &who, &fence); err != nil {
			t.Fatalf("line %d %q: want an entry: %v", i, lines[i], err)
		}
		if _, err := fmt.Sscanf(lines[i+1], "exit %s %d", &who2, &fence2); err != nil || who2 != who || fence2 != fence {
			t.Fatalf("line %d %q: want %s's exit before anyone else enters", i+1, lines[i+1], who)
		}
		if fence <= last {
			t.Fatalf("line %d: fence %d after %d", i, fence, last)
		}
		last = fence
	}
}

// waitLead waits for a "lead" line after the first skip lines and returns
// the leader's id and how many lines the journal had.
func waitLead(t *testing.T, s *redisproc.Server, skip int, timeout time.Duration) (string, int) {
	t.Helper()
	var who string
	n := 0
	waitFor(t, timeout, "a new leader", func() bool {
		lines := readJournal(t, s)
		n = len(lines)
		for _, l := range lines[min(skip, len(lines)):] {
			if rest, ok := strings.CutPrefix(l, "lead "); ok {
				who = strings.Fields(rest)[0]
				return true
			}
		}
		return false
	})
	return who, n
}

// L1 across processes: a SIGKILLed leader is replaced within its ttl plus a
// margin, a SIGTERMed one at once.
func TestElectorFailoverAcrossProcesses(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	procs := map[string]*proc.Process{}
	for i := 0; i < 3; i++ {
		id := "e" + strconv.Itoa(i)
		procs[id] = spawn(t, s, "elect", id)
	}
	leader, seen := waitLead(t, s, 0, 10*time.Second)

	killed := time.Now()
	if err := procs[leader].Kill(); err != nil {
		t.Fatal(err)
	}
	next, seen := waitLead(t, s, seen, 5*time.Second)
	crash := time.Since(killed)
	if next == leader {
		t.Fatalf("killed leader %s reported leading again", leader)
	}

	termed := time.Now()
	if err := procs[next].Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	third, _ := waitLead(t, s, seen, 5*time.Second)
	handover := time.Since(termed)
	if third == next || third == leader {
		t.Fatalf("after %s stopped, %s leads", next, third)
	}
	t.Logf("failover after SIGKILL %v (ttl 1s), handover after SIGTERM %v", crash, handover)
	// A standby that waited for expiry would take the whole 1s ttl.
	if handover > 500*time.Millisecond {
		t.Fatalf("handover after SIGTERM took %v: the release did not wake the standby", handover)
	}
}

// S1 through a process pause: a leader stopped (SIGSTOP) past its ttl must,
// on waking, not act as leader, even before its timers have run.
func TestPausedLeaderDoesNotActAfterWaking(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	procs := map[string]*proc.Process{}
	for i := 0; i < 3; i++ {
		id := "a" + strconv.Itoa(i)
		procs[id] = spawn(t, s, "act", id)
	}
	firstAct := func(after int, not string) (string, int) {
		var who string
		at := 0
		waitFor(t, 10*time.Second, "an action", func() bool {
			lines := readJournal(t, s)
			for i := after; i < len(lines); i++ {
				f := strings.Fields(lines[i])
				if f[0] == "act" && f[1] != not {
					who, at = f[1], i
					return true
				}
			}
			return false
		})
		return who, at
	}
	paused, _ := firstAct(0, "")
	if err := procs[paused].Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// Past the 500ms ttl another candidate leads and acts.
	_, takeover := firstAct(0, paused)
	woken := time.Now().UnixNano() // no check of the paused process can start before this
	if err := procs[paused].Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the woken leader to step down", func() bool {
		return slices.Contains(readJournal(t, s), "stop "+paused)
	})
	// An action whose check began after the wake-up is a new decision
	// taken by a process paused past its deadline: S1 forbids it. An
	// action checked before the pause and sent after it is the
	// check-then-act race that only fencing covers (its fence is stale).
	lines := readJournal(t, s)
	for _, l := range lines[takeover:] {
		var who string
		var fence, before, after int64
		if n, _ := fmt.Sscanf(l, "act %s %d %d %d", &who, &fence, &before, &after); n != 4 || who != paused {
			continue
		}
		if before > woken {
			t.Fatalf("%s decided to act %v after waking, with fence %d: %q in\n%s", paused, time.Duration(before-woken), fence, l, strings.Join(lines[takeover:], "\n"))
		}
	}
}
