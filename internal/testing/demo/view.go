package demo

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/internal/leaderhttp"
	"github.com/redislock/redislock/internal/testing/proc"
)

// candidate is a process electing on a lock, answering /leader at url.
type candidate struct {
	*proc.Process
	id, url string
	dead    string // its state once it has exited: killed or stopped
}

// state asks c's /leader: LEADER (with the instant the answer is true
// of), standby, or c.dead once it has exited.
func (c *candidate) state(ctx context.Context) (string, time.Time) {
	if c.Exited() {
		return c.dead, time.Time{}
	}
	ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if st, code, err := leaderhttp.Get(ctx, c.url); err == nil && code == http.StatusOK {
		return "LEADER", st.ObservedAt
	}
	return "standby", time.Time{}
}

// leader returns the first of cs, other than not, that answers it leads.
func leader(ctx context.Context, cs []*candidate, not *candidate) (*candidate, time.Time) {
	for _, c := range cs {
		if state, at := c.state(ctx); c != not && state == "LEADER" {
			return c, at
		}
	}
	return nil, time.Time{}
}

// running counts the candidates that have not exited.
func running(cs []*candidate) (n int) {
	for _, c := range cs {
		if !c.Exited() {
			n++
		}
	}
	return n
}

// The screen: the account of events, and a table of who leads, redrawn
// each second with the latest events under it (Live), or each event and
// each change of the table printed as lines (a log).

// event records a line of the account.
func (d *demo) event(format string, args ...any) {
	line := fmt.Sprintf("%7.2fs  %s", time.Since(d.began).Seconds(), fmt.Sprintf(format, args...))
	d.mu.Lock()
	defer d.mu.Unlock()
	d.events = append(d.events, line)
	if !d.Live || !d.showing {
		_, _ = fmt.Fprintln(d.Out, line)
	}
}

// show refreshes the table every second until ctx ends or stop is called;
// stop refreshes it once more (a live table then ends with the last events).
func (d *demo) show(ctx context.Context) (stop func()) {
	d.mu.Lock()
	d.showing = true
	d.mu.Unlock()
	showCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { wait.UntilWithContext(showCtx, d.refresh, time.Second) })
	return func() {
		cancel()
		wg.Wait()
		d.refresh(ctx)
	}
}

// refresh reads the RedisLocks, asks every candidate, and prints.
func (d *demo) refresh(ctx context.Context) {
	var locks v1alpha1.RedisLockList
	if err := d.k8s.List(ctx, &locks, client.InNamespace(namespace)); err != nil {
		return // the control plane is stopping; the next refresh tries again
	}
	rows := []string{"LOCK\tHOLDER (status)\tFENCE\tTRANSITIONS\tCANDIDATES"}
	for _, rl := range locks.Items {
		var states []string
		for _, c := range map[string][]*candidate{operatorLock: d.operators, workerLock: d.agents}[rl.Name] {
			state, _ := c.state(ctx)
			states = append(states, c.id+" "+state)
		}
		holder := map[bool]string{true: "-", false: rl.Status.HolderIdentity}[rl.Status.HolderIdentity == ""]
		rows = append(rows, fmt.Sprintf("%s/%s\t%s\t%d\t%d\t%s", rl.Namespace, rl.Name, holder, rl.Status.FencingToken, rl.Status.LeaderTransitions, strings.Join(states, "  ")))
	}
	t := table(rows)
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.Live:
		mode := map[bool]string{false: "one Redis node", true: "Redlock on 3 Redis nodes"}[d.Redlock]
		_, _ = fmt.Fprintf(d.Out, "\033[H\033[2Jredislock demo  %.0fs  ttl %v  %s\n\n%s\n%s\n", time.Since(d.began).Seconds(), d.TTL, mode, t,
			strings.Join(d.events[max(0, len(d.events)-12):], "\n"))
	case t != d.rows:
		_, _ = fmt.Fprintf(d.Out, "%7.2fs  who leads:\n%s", time.Since(d.began).Seconds(), indent(t))
	}
	d.rows = t
}

// table aligns the tab-separated columns of rows.
func table(rows []string) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, strings.Join(rows, "\n"))
	_ = tw.Flush() // a strings.Builder does not fail
	return b.String()
}

// indent indents every line of s to under the account's times.
func indent(s string) string {
	return "          " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n          ") + "\n"
}
