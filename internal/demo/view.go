package demo

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/internal/leaderhttp"
	"github.com/redislock/redislock/internal/proc"
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

// view keeps the account and prints it: a table of who leads, redrawn each
// second with the latest events under it (live), or each event and each
// change of the table as lines (a log).
type view struct {
	out           io.Writer
	live, redlock bool
	ttl           time.Duration
	start         time.Time

	mu     sync.Mutex
	events []string
	rows   string                  // the table as last printed
	k8s    client.Client           // what show reads
	locks  map[string][]*candidate // by lock name; nil until show
}

// event records a line of the account.
func (v *view) event(format string, args ...any) {
	line := fmt.Sprintf("%7.2fs  %s", time.Since(v.start).Seconds(), fmt.Sprintf(format, args...))
	v.mu.Lock()
	defer v.mu.Unlock()
	v.events = append(v.events, line)
	if !v.live || v.locks == nil {
		_, _ = fmt.Fprintln(v.out, line)
	}
}

// show refreshes the table every second until ctx ends or stop is called;
// stop refreshes it once more (a live table then ends with the last events).
func (v *view) show(ctx context.Context, k8s client.Client, operators, agents []*candidate) (stop func()) {
	v.mu.Lock()
	v.k8s, v.locks = k8s, map[string][]*candidate{operatorLock: operators, workerLock: agents}
	v.mu.Unlock()
	showCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { wait.UntilWithContext(showCtx, v.refresh, time.Second) })
	return func() {
		cancel()
		wg.Wait()
		v.refresh(ctx)
	}
}

// refresh reads the RedisLocks, asks every candidate, and prints.
func (v *view) refresh(ctx context.Context) {
	var locks v1alpha1.RedisLockList
	if err := v.k8s.List(ctx, &locks, client.InNamespace(namespace)); err != nil {
		return // the control plane is stopping; the next refresh tries again
	}
	rows := []string{"LOCK\tHOLDER (status)\tFENCE\tTRANSITIONS\tCANDIDATES"}
	for _, rl := range locks.Items {
		var states []string
		for _, c := range v.locks[rl.Name] {
			state, _ := c.state(ctx)
			states = append(states, c.id+" "+state)
		}
		holder := map[bool]string{true: "-", false: rl.Status.HolderIdentity}[rl.Status.HolderIdentity == ""]
		rows = append(rows, fmt.Sprintf("%s/%s\t%s\t%d\t%d\t%s", rl.Namespace, rl.Name, holder, rl.Status.FencingToken, rl.Status.LeaderTransitions, strings.Join(states, "  ")))
	}
	t := table(rows)
	v.mu.Lock()
	defer v.mu.Unlock()
	switch {
	case v.live:
		mode := map[bool]string{false: "one Redis node", true: "Redlock on 3 Redis nodes"}[v.redlock]
		_, _ = fmt.Fprintf(v.out, "\033[H\033[2Jredislock demo  %.0fs  ttl %v  %s\n\n%s\n%s\n", time.Since(v.start).Seconds(), v.ttl, mode, t,
			strings.Join(v.events[max(0, len(v.events)-12):], "\n"))
	case t != v.rows:
		_, _ = fmt.Fprintf(v.out, "%7.2fs  who leads:\n%s", time.Since(v.start).Seconds(), indent(t))
	}
	v.rows = t
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
