package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"slices"
	"time"
)

// timing is the election timing a benchmark gave every method, as
// durations ("15s"); for Redis, the RedisLock's ttl, renewDeadline and
// renewInterval.
type timing struct {
	LeaseDuration string `json:"leaseDuration"`
	RenewDeadline string `json:"renewDeadline"`
	RetryPeriod   string `json:"retryPeriod"`
}

// String is the timing as the report says it.
func (t timing) String() string {
	return fmt.Sprintf("LeaseDuration (a RedisLock's ttl) %s, RenewDeadline %s, RetryPeriod (renewInterval) %s", t.LeaseDuration, t.RenewDeadline, t.RetryPeriod)
}

// failover is what TestFailoverBenchmark (test/e2e) writes to
// $FAILOVER_JSON; the field names are the contract between the two.
type failover struct {
	Trials int `json:"trials"`
	timing
	IdleWindow string           `json:"idleWindow"`
	Methods    []failoverMethod `json:"methods"`
}

// failoverMethod is one election method's trials.
type failoverMethod struct {
	Method             string    `json:"method"` // redis or lease
	CrashSeconds       []float64 `json:"crashSeconds"`
	GracefulSeconds    []float64 `json:"gracefulSeconds"`
	APIWritesPerMinute float64   `json:"apiWritesPerMinute"`
}

// controllerScale is what TestControllerBenchmark (test/e2e) writes to
// $CONTROLLER_BENCH_JSON; the field names are the contract between the two.
type controllerScale struct {
	Namespaces         int             `json:"namespaces"`
	Resync             string          `json:"resync"`
	Window             string          `json:"window"`
	HandoversPerMinute int             `json:"handoversPerMinute"`
	Runs               []controllerRun `json:"runs"`
}

// controllerRun is one backend and count of RedisLocks.
type controllerRun struct {
	Backend              string    `json:"backend"`
	Locks                int       `json:"locks"`
	ReadySeconds         float64   `json:"readySeconds"` // from the controller's start
	RSSBytes             int64     `json:"rssBytes"`     // at the end
	PeakRSSBytes         int64     `json:"peakRssBytes"`
	HeapInuseBytes       int64     `json:"heapInuseBytes"`
	IdleAPIPerMinute     float64   `json:"idleApiPerMinute"`
	HandoverAPIPerMinute float64   `json:"handoverApiPerMinute"`
	LagSeconds           []float64 `json:"lagSeconds"` // per handover, in order
}

// hostileTenants is what TestControllerAmongHostileTenants (test/e2e)
// writes to $HOSTILE_BENCH_JSON; the field names are the contract between
// the two.
type hostileTenants struct {
	Healthy              int       `json:"healthy"`
	BlackHoles           int       `json:"blackHoles"`
	Handovers            int       `json:"handovers"`
	Every                string    `json:"every"`
	QuietLagSeconds      []float64 `json:"quietLagSeconds"`
	QuietPeakRSSBytes    int64     `json:"quietPeakRssBytes"`
	HostileLagSeconds    []float64 `json:"hostileLagSeconds"`
	HostilePeakRSSBytes  int64     `json:"hostilePeakRssBytes"`
	NewLockReadySeconds  float64   `json:"newLockReadySeconds"`
	BlackHoleConnections int       `json:"blackHoleConnections"`
	BlackHolesShown      int       `json:"blackHolesShown"`
}

// waiters is what TestWaiters (this module) writes to $WAITERS_JSON; the
// field names are the contract between the two.
type waiters struct {
	Handovers int               `json:"handovers"`
	Scenarios []waitersScenario `json:"scenarios"`
}

// waitersScenario is one way of waiting: its Client's connections and
// memory, and per handover its time, the server's CPU and scripts.
type waitersScenario struct {
	Name              string    `json:"name"`
	Waiters           int       `json:"waiters"`
	Names             int       `json:"names"`
	Connections       int       `json:"connections"`
	PubSubConnections int       `json:"pubsubConnections"`
	PoolSize          int       `json:"poolSize"`
	ClientBytes       int64     `json:"clientBytes"`
	HandoverSeconds   []float64 `json:"handoverSeconds"`
	RedisCPUSeconds   []float64 `json:"redisCpuSeconds"`
	Scripts           []int64   `json:"scripts"`
}

// clusterEvents is what TestClusterEvents (this module) writes to
// $CLUSTER_EVENTS_JSON; the field names are the contract between the two.
type clusterEvents struct {
	Masters  int                 `json:"masters"`
	Replicas int                 `json:"replicas"`
	Cycles   int                 `json:"cycles"`
	Cases    []clusterEventsCase `json:"cases"`
}

// clusterEventsCase is one way of announcing the grants and releases: the
// pub/sub messages on the cluster bus, and the nodes that received any.
type clusterEventsCase struct {
	Name         string `json:"name"`
	Events       int    `json:"events"`
	BusMessages  int    `json:"busMessages"`
	NodesReached int    `json:"nodesReached"`
}

// steadyState is what TestSteadyStateBenchmark (test/e2e) writes to
// $STEADY_JSON; the field names are the contract between the two.
type steadyState struct {
	Window string `json:"window"`
	timing
	Cases []steadyCase `json:"cases"`
}

// steadyCase is one method at one number of candidates, as rates over
// the measured window. The Redis rates are those of the one redis-server,
// nil for the cases without Redis.
type steadyCase struct {
	Method                  string   `json:"method"` // none, agent, plugin or lease
	Candidates              int      `json:"candidates"`
	Seconds                 float64  `json:"seconds"`
	RedisCommandsPerSecond  *float64 `json:"redisCommandsPerSecond"`
	RedisScriptsPerSecond   *float64 `json:"redisScriptsPerSecond"`
	NaturalScriptsPerSecond *float64 `json:"naturalScriptsPerSecond"`
	APIWritesPerMinute      float64  `json:"apiWritesPerMinute"`
	APIReadsPerMinute       float64  `json:"apiReadsPerMinute"`
}

// outage is what TestLeadershipThroughAPIServerOutage (test/e2e) writes
// to $OUTAGE_JSON; the field names are the contract between the two.
type outage struct {
	Outage         string `json:"outage"` // how long kube-apiserver was stopped
	Replicas       int    `json:"replicas"`
	RestartBackoff string `json:"restartBackoff"` // an exited replica's first restart, doubling after
	timing
	Methods []outageMethod `json:"methods"`
}

// outageMethod is what one election method did through the outage.
type outageMethod struct {
	Method                string  `json:"method"` // redis or lease
	LeaderKeptLeading     bool    `json:"leaderKeptLeading"`
	LeaderChanges         int     `json:"leaderChanges"`
	Exits                 int     `json:"exits"`
	Restarts              int     `json:"restarts"`
	NoLeaderSeconds       float64 `json:"noLeaderSeconds"`       // from the stop on, no replica leading
	FirstReconcileSeconds float64 `json:"firstReconcileSeconds"` // from the resume to the first reconcile's write
}

// methodLabel names an election method for people.
func methodLabel(m string) string {
	switch m {
	case "redis", "plugin":
		return "Redis plugin"
	case "agent":
		return "Redis agent"
	case "lease":
		return "Lease"
	case "none":
		return "no election"
	}
	return m
}

// loadJSON decodes the file at path into a T. A missing file is no
// error: it returns nil, and the report says that part was not run.
func loadJSON[T any](path string) (*T, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	v := new(T)
	if err := json.Unmarshal(b, v); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// quantile returns the p-quantile of vs by nearest rank: the maximum when
// len(vs) < 1/(1-p).
func quantile(vs []float64, p float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// seconds formats a time in seconds to the millisecond, as time.Duration
// prints it ("4ms", "13.97s").
func seconds(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return time.Duration(v * float64(time.Second)).Round(time.Millisecond).String()
}

// rate formats a rate to two decimals, or "–" when there is none.
func rate(v *float64) string {
	if v == nil {
		return "–"
	}
	return fmt.Sprintf("%.2f", *v)
}

// yesNo formats a boolean for people.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// mib formats a byte count in MiB, or n/a for zero.
func mib(b int64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}
