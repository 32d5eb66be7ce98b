package demo

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/redislock/redislock/api/v1alpha1"
)

// view keeps the account of who leads and prints it: a table redrawn each
// second with the latest events under it (live), or each event and each
// change of the table as lines (a log).
type view struct {
	out     io.Writer
	live    bool
	ttl     time.Duration
	redlock bool
	start   time.Time

	mu        sync.Mutex
	events    []string
	leadingAt map[string]time.Time // operator -> when it last became leader
	answers   map[string]string    // agent -> LEADER, standby or down
	rows      string               // the table as last printed
	k8s       client.Client
	operators map[string]*proc
	agents    map[string]*agentProc
	done      chan struct{}
	stopped   chan struct{}
}

func newView(out io.Writer, live bool, ttl time.Duration, redlock bool) *view {
	return &view{out: out, live: live, ttl: ttl, redlock: redlock, start: time.Now(),
		leadingAt: map[string]time.Time{}, answers: map[string]string{},
		done: make(chan struct{}), stopped: make(chan struct{})}
}

// event records a line of the account.
func (v *view) event(format string, args ...any) {
	line := fmt.Sprintf("%7.2fs  %s", time.Since(v.start).Seconds(), fmt.Sprintf(format, args...))
	v.mu.Lock()
	defer v.mu.Unlock()
	v.events = append(v.events, line)
	if !v.live || v.k8s == nil {
		_, _ = fmt.Fprintln(v.out, line)
	}
}

// operatorStarted and operatorLine follow a sample operator through its
// stdout ("LEADING <id> <unix-nanos>" when it becomes leader).
func (v *view) operatorStarted(id string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.leadingAt[id] = time.Time{}
}

func (v *view) operatorLine(id, line string) {
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "LEADING" || f[1] != id {
		return
	}
	var nanos int64
	if _, err := fmt.Sscan(f[2], &nanos); err != nil {
		return
	}
	v.mu.Lock()
	v.leadingAt[id] = time.Unix(0, nanos)
	v.mu.Unlock()
}

// operatorLeading returns the live operator that became leader last, and
// when; "" when none leads.
func (v *view) operatorLeading() (string, time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.operatorLeadingLocked()
}

// operatorLeadingLocked is operatorLeading with v.mu held.
func (v *view) operatorLeadingLocked() (string, time.Time) {
	var id string
	var at time.Time
	for op, t := range v.leadingAt {
		if p := v.operators[op]; !t.IsZero() && t.After(at) && (p == nil || p.alive()) {
			id, at = op, t
		}
	}
	return id, at
}

func (v *view) operatorLeader() string {
	id, _ := v.operatorLeading()
	return id
}

// agentLeader returns the agent whose last answer was 200, "" if none.
func (v *view) agentLeader() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	for name, a := range v.answers {
		if a == "LEADER" {
			return name
		}
	}
	return ""
}

// attach gives the view what it reads: the API and the processes.
func (v *view) attach(k8s client.Client, operators map[string]*proc, agents map[string]*agentProc) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.k8s, v.operators, v.agents = k8s, operators, agents
}

// run refreshes and prints the account every second until stop.
func (v *view) run(ctx context.Context) {
	defer close(v.stopped)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		v.refresh(ctx)
		select {
		case <-ctx.Done():
			return
		case <-v.done:
			v.refresh(ctx) // a live table then ends with the last events
			return
		case <-tick.C:
		}
	}
}

// stop ends run, if it runs, after one last refresh.
func (v *view) stop() {
	v.mu.Lock()
	attached := v.k8s != nil
	v.mu.Unlock()
	if !attached {
		return
	}
	close(v.done)
	<-v.stopped
}

// refresh asks every agent, reads the RedisLocks, and prints.
func (v *view) refresh(ctx context.Context) {
	v.mu.Lock()
	agents := v.agents
	v.mu.Unlock()
	answers := map[string]string{}
	for name, a := range agents {
		switch {
		case !a.alive():
			answers[name] = "stopped"
		case leading(ctx, a.url):
			answers[name] = "LEADER"
		default:
			answers[name] = "standby"
		}
	}
	var locks v1alpha1.RedisLockList
	if err := v.k8s.List(ctx, &locks, client.InNamespace(namespace)); err != nil {
		return // the control plane is stopping; the next refresh tries again
	}

	v.mu.Lock()
	defer v.mu.Unlock()
	v.answers = answers
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "LOCK\tHOLDER (status)\tFENCE\tTRANSITIONS\tCANDIDATES")
	for _, rl := range locks.Items {
		_, _ = fmt.Fprintf(tw, "%s/%s\t%s\t%d\t%d\t%s\n", rl.Namespace, rl.Name, orDash(rl.Status.HolderIdentity),
			rl.Status.FencingToken, rl.Status.LeaderTransitions, v.candidates(rl.Name))
	}
	_ = tw.Flush()
	rows := b.String()
	if v.live {
		mode := "one Redis node"
		if v.redlock {
			mode = "Redlock on 3 Redis nodes"
		}
		_, _ = fmt.Fprintf(v.out, "\033[H\033[2Jredislock demo  %.0fs  ttl %v  %s\n\n%s\n", time.Since(v.start).Seconds(), v.ttl, mode, rows)
		for _, e := range v.events[max(0, len(v.events)-12):] {
			_, _ = fmt.Fprintln(v.out, e)
		}
		return
	}
	if rows != v.rows {
		_, _ = fmt.Fprintf(v.out, "%7.2fs  who leads:\n%s", time.Since(v.start).Seconds(), indent(rows))
	}
	v.rows = rows
}

// candidates describes the candidates of the lock called name. v.mu is held.
func (v *view) candidates(name string) string {
	var parts []string
	switch name {
	case operatorLock:
		leader, _ := v.operatorLeadingLocked()
		for op, p := range v.operators {
			state := "standby"
			switch {
			case !p.alive():
				state = "killed"
			case op == leader:
				state = "LEADER"
			}
			parts = append(parts, op+" "+state)
		}
	case workerLock:
		for a, state := range v.answers {
			parts = append(parts, a+" "+state)
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, "  ")
}

// leading asks an agent's /leader.
func leading(ctx context.Context, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func indent(s string) string {
	return "          " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n          ") + "\n"
}
