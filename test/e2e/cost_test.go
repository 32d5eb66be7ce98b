package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redisstats"
)

// chaosIdleWindow is how long the chaos run counts the cost of a stable
// election before its faults begin.
const chaosIdleWindow = 30 * time.Second

// costReading is what an election cost Redis and the API server over a
// window: script calls per node, status writes, leadership changes.
type costReading struct {
	took            time.Duration
	scripts         []int64 // per node
	changes         int
	writesPerMinute float64
}

// chaosObservers is what the chaos run adds to its four standbys in Redis
// calls: the controller inspects the lock about once per ttl.
const chaosObservers = 1

// check fails t if any node ran more scripts than redisstats.Budget allows
// for the run's candidates with changes leadership changes, and logs the
// figures.
func (c costReading) check(t *testing.T, state string, changes int) {
	t.Helper()
	standbys := 4 + chaosObservers
	budget := redisstats.Budget(c.took, faultTiming.lease, faultTiming.retry, standbys, changes)
	for i, n := range c.scripts {
		t.Logf("E1 %s: node %d ran %d scripts in %v (%.1f/s; budget %d); %.1f status writes a minute",
			state, i, n, c.took.Round(time.Millisecond), float64(n)/c.took.Seconds(), budget, c.writesPerMinute)
		if n > budget {
			t.Errorf("E1 %s: node %d ran %d scripts in %v, over the budget of %d", state, i, n, c.took.Round(time.Millisecond), budget)
		}
	}
	// The controller writes the status when the holder changes: its
	// identity, then its conditions, a few writes per change.
	if limit := 4 * float64(changes) * float64(time.Minute) / float64(c.took); c.writesPerMinute > limit+1 {
		t.Errorf("E1 %s: %.1f status writes a minute for %d leadership changes in %v; want at most %.1f", state, c.writesPerMinute, changes, c.took.Round(time.Second), limit+1)
	}
}

// maxScriptsPerSecond is the busiest node's rate.
func (c costReading) maxScriptsPerSecond() float64 {
	return float64(slices.Max(c.scripts)) / c.took.Seconds()
}

// costMeter counts what nodes execute, and the status writes in the run's
// namespace, from its start until stop.
type costMeter struct {
	r      *chaosRun
	nodes  []redis.UniversalClient
	before []redisstats.Counts
	writes func() (int, time.Duration)
}

func (r *chaosRun) startCost(servers []*redisproc.Server) *costMeter {
	m := &costMeter{r: r}
	for _, s := range servers {
		c := s.Client()
		r.t.Cleanup(func() { _ = c.Close() })
		m.nodes = append(m.nodes, c)
	}
	m.before = m.read()
	m.writes = countElectionWrites(r.t, r.ns)
	return m
}

// read counts every node's commands; a node that is down (a fault) counts
// as having run nothing more.
func (m *costMeter) read() []redisstats.Counts {
	counts := make([]redisstats.Counts, len(m.nodes))
	for i, n := range m.nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := redisstats.Read(ctx, n)
		cancel()
		if err != nil {
			m.r.t.Logf("cannot count node %d's commands: %v", i, err)
			if m.before != nil {
				c = m.before[i]
			}
		}
		counts[i] = c
	}
	return counts
}

// stop ends the count; changes is how many leadership changes it saw.
func (m *costMeter) stop(changes int) costReading {
	after := m.read()
	n, took := m.writes()
	c := costReading{took: took, changes: changes, writesPerMinute: float64(n) * float64(time.Minute) / float64(took)}
	for i := range after {
		// A restarted node counts from zero again; its count since the
		// restart is all there is.
		d := after[i].Sub(m.before[i]).Scripts()
		if d < 0 {
			d = after[i].Scripts()
		}
		c.scripts = append(c.scripts, d)
	}
	return c
}

// measureCost counts what the nodes execute, and the status writes, while
// during runs; during returns the leadership changes it saw.
func (r *chaosRun) measureCost(servers []*redisproc.Server, during func() (changes int)) costReading {
	m := r.startCost(servers)
	return m.stop(during())
}

// fenceGrowth returns, sorted, how much the fencing token grew from each
// term to the next.
func fenceGrowth(spans []span) []int64 {
	sorted := slices.Clone(spans)
	slices.SortFunc(sorted, func(a, b span) int { return a.first.Compare(b.first) })
	var growth []int64
	for i := 1; i < len(sorted); i++ {
		growth = append(growth, sorted[i].fence-sorted[i-1].fence)
	}
	slices.Sort(growth)
	return growth
}

// journalCopy returns the candidates' own records so far.
func (r *chaosRun) journalCopy() []journalEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]journalEntry(nil), r.journal...)
}
