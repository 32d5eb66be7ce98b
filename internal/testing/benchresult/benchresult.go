// Package benchresult holds the JSON shapes the benchmark tests write
// (test/e2e's and test/bench's) and test/bench/cmd/benchreport reads, one
// owner each: a writer and the report cannot disagree on a field's name.
package benchresult

import "fmt"

// Timing is the election timing a benchmark gave every method, as
// durations ("15s"); for Redis, the RedisLock's ttl, renewDeadline and
// renewInterval. Failover, SteadyState and Outage embed it.
type Timing struct {
	LeaseDuration string `json:"leaseDuration"`
	RenewDeadline string `json:"renewDeadline"`
	RetryPeriod   string `json:"retryPeriod"`
}

// String is the timing as the report says it.
func (t Timing) String() string {
	return fmt.Sprintf("LeaseDuration (a RedisLock's ttl) %s, RenewDeadline %s, RetryPeriod (renewInterval) %s", t.LeaseDuration, t.RenewDeadline, t.RetryPeriod)
}

// Failover is what TestFailoverBenchmark (test/e2e) writes to
// $FAILOVER_JSON, times in seconds.
type Failover struct {
	Trials int `json:"trials"`
	Timing
	IdleWindow string           `json:"idleWindow"`
	Methods    []FailoverMethod `json:"methods"`
}

// FailoverMethod is one election method's trials.
type FailoverMethod struct {
	Method             string    `json:"method"` // redis or lease
	CrashSeconds       []float64 `json:"crashSeconds"`
	GracefulSeconds    []float64 `json:"gracefulSeconds"`
	APIWritesPerMinute float64   `json:"apiWritesPerMinute"`
}

// ControllerScale is what TestControllerBenchmark (test/e2e) writes to
// $CONTROLLER_BENCH_JSON, times in seconds.
type ControllerScale struct {
	Namespaces         int             `json:"namespaces"`
	Resync             string          `json:"resync"`
	Window             string          `json:"window"`
	HandoversPerMinute int             `json:"handoversPerMinute"`
	Runs               []ControllerRun `json:"runs"`
}

// ControllerRun is one backend and count of RedisLocks of
// TestControllerBenchmark.
type ControllerRun struct {
	Backend      string  `json:"backend"`
	Locks        int     `json:"locks"`
	ReadySeconds float64 `json:"readySeconds"` // from the controller's start
	// What the start to Ready cost: the API writes (on the resources the
	// idle and handover counts cover), and the CPU seconds of
	// kube-apiserver, etcd and the controller (from its start).
	ReadyAPIWrites            float64   `json:"readyApiWrites"`
	ReadyAPIServerCPUSeconds  float64   `json:"readyApiServerCpuSeconds"`
	ReadyEtcdCPUSeconds       float64   `json:"readyEtcdCpuSeconds"`
	ReadyControllerCPUSeconds float64   `json:"readyControllerCpuSeconds"`
	RSSBytes                  int64     `json:"rssBytes"` // at the end
	PeakRSSBytes              int64     `json:"peakRssBytes"`
	HeapInuseBytes            int64     `json:"heapInuseBytes"`
	IdleAPIPerMinute          float64   `json:"idleApiPerMinute"`
	HandoverAPIPerMinute      float64   `json:"handoverApiPerMinute"`
	LagSeconds                []float64 `json:"lagSeconds"` // per handover, in order
}

// HostileTenants is what TestControllerAmongHostileTenants (test/e2e)
// writes to $HOSTILE_BENCH_JSON, times in seconds.
type HostileTenants struct {
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

// SteadyState is what TestSteadyStateBenchmark (test/e2e) writes to
// $STEADY_JSON.
type SteadyState struct {
	Window string `json:"window"`
	Timing
	Cases []SteadyCase `json:"cases"`
}

// SteadyCase is one method at one number of candidates, as rates over
// the measured window. The Redis rates are those of the one redis-server,
// nil (absent from the JSON) for the cases without Redis.
type SteadyCase struct {
	Method                  string   `json:"method"` // none, agent, plugin or lease
	Candidates              int      `json:"candidates"`
	Seconds                 float64  `json:"seconds"` // the measured window
	RedisCommandsPerSecond  *float64 `json:"redisCommandsPerSecond,omitempty"`
	RedisScriptsPerSecond   *float64 `json:"redisScriptsPerSecond,omitempty"`
	NaturalScriptsPerSecond *float64 `json:"naturalScriptsPerSecond,omitempty"`
	APIWritesPerMinute      float64  `json:"apiWritesPerMinute"`
	APIReadsPerMinute       float64  `json:"apiReadsPerMinute"`
}

// Outage is what TestLeadershipThroughAPIServerOutage (test/e2e) writes
// to $OUTAGE_JSON, times in seconds.
type Outage struct {
	Outage         string `json:"outage"` // how long kube-apiserver was stopped
	Replicas       int    `json:"replicas"`
	RestartBackoff string `json:"restartBackoff"` // an exited replica's first restart, doubling after
	Timing
	Methods []OutageMethod `json:"methods"`
}

// OutageMethod is what one election method did through the outage.
type OutageMethod struct {
	Method                string  `json:"method"` // redis or lease
	LeaderKeptLeading     bool    `json:"leaderKeptLeading"`
	LeaderChanges         int     `json:"leaderChanges"`
	Exits                 int     `json:"exits"`
	Restarts              int     `json:"restarts"`
	NoLeaderSeconds       float64 `json:"noLeaderSeconds"`       // from the stop on, no replica leading
	FirstReconcileSeconds float64 `json:"firstReconcileSeconds"` // from the resume to the first reconcile's write
}

// Waiters is what TestWaiters (test/bench) writes to $WAITERS_JSON.
type Waiters struct {
	Handovers int                `json:"handovers"`
	Scenarios []*WaitersScenario `json:"scenarios"`
}

// WaitersScenario is one way of waiting in TestWaiters, and what it
// measured: its Client's connections and memory, and per handover its
// time, the server's CPU and scripts.
type WaitersScenario struct {
	Name    string `json:"name"`
	Waiters int    `json:"waiters"`
	Names   int    `json:"names"`
	// Connections and PubSubConnections are the waiting Client's
	// connections to the node once every waiter waits (CLIENT LIST, by
	// client name), PoolSize its go-redis pool's size.
	Connections       int `json:"connections"`
	PubSubConnections int `json:"pubsubConnections"`
	PoolSize          int `json:"poolSize"`
	// ClientBytes is what the waiters added to the heap and the stacks
	// in use (runtime.MemStats after a GC).
	ClientBytes int64 `json:"clientBytes"`
	// Per handover: the time from the start of a release to a waiter's
	// ObtainWait returning the lock; the server's CPU over it, counted
	// until every waiter it woke has tried; its script calls.
	HandoverSeconds []float64 `json:"handoverSeconds"`
	RedisCPUSeconds []float64 `json:"redisCpuSeconds"`
	Scripts         []int64   `json:"scripts"`
}

// ClusterEvents is what TestClusterEvents (test/bench) writes to
// $CLUSTER_EVENTS_JSON.
type ClusterEvents struct {
	Masters  int                 `json:"masters"`
	Replicas int                 `json:"replicas"`
	Cycles   int                 `json:"cycles"`
	Cases    []ClusterEventsCase `json:"cases"`
}

// ClusterEventsCase is one way of announcing Cycles grants and releases:
// the pub/sub messages the nodes sent each other on the cluster bus, and
// how many nodes received any.
type ClusterEventsCase struct {
	Name         string `json:"name"`
	Events       int    `json:"events"`
	BusMessages  int    `json:"busMessages"`
	NodesReached int    `json:"nodesReached"`
}

// Interleaved is what TestInterleaved (test/bench) writes to
// $INTERLEAVED_JSON: every implementation's samples, slot by slot in
// interleaved rounds.
type Interleaved struct {
	Rounds    int                    `json:"rounds"`
	Slot      string                 `json:"slot"`
	Scenarios []*InterleavedScenario `json:"scenarios"`
}

// InterleavedScenario is one interleaved comparison; the report's ratios
// are to its Reference entry.
type InterleavedScenario struct {
	Name      string              `json:"name"`
	Parallel  bool                `json:"parallel"`
	Reference string              `json:"reference"`
	Entries   []*InterleavedEntry `json:"entries"`
}

// InterleavedEntry is one implementation of a scenario with its per-round
// samples.
type InterleavedEntry struct {
	Name    string              `json:"name"`
	Nodes   int                 `json:"nodes"`
	Samples []InterleavedSample `json:"samples"`
}

// InterleavedSample is one slot of one implementation: per
// acquire+release, wall time, the servers' CPU, the client's allocations
// and each command's calls and µs.
type InterleavedSample struct {
	Ops int `json:"ops"`
	// NsPerOp is wall time per acquire+release.
	NsPerOp float64 `json:"nsPerOp"`
	// CPUUsPerOp is the servers' CPU (all nodes together) per op, in µs.
	CPUUsPerOp float64 `json:"cpuUsPerOp"`
	// ClientCPUUsPerOp is the benchmark process's CPU (user and system,
	// every thread) per op, in µs: with CPUUsPerOp, what the machine's
	// cores had to run per op.
	ClientCPUUsPerOp float64 `json:"clientCpuUsPerOp"`
	// AllocsPerOp is heap allocations per op in the benchmark process
	// (serial slots only: a parallel slot's goroutines share the count).
	AllocsPerOp float64 `json:"allocsPerOp,omitempty"`
	// Commands are calls and µs per op of each command the servers ran,
	// those run by scripts included.
	Commands map[string]CommandCost `json:"commands"`
}

// CommandCost is what one command cost the servers per acquire+release.
type CommandCost struct {
	CallsPerOp float64 `json:"callsPerOp"`
	UsPerOp    float64 `json:"usPerOp"`
}

// Fencing is what the fencing tests of test/e2e write to $FENCING_JSON,
// times in seconds: TestFencingPolicyAdmitsOnlyTheHolder's handovers, in
// which raw clients with the two pods' bound tokens write back to back
// from the new holder's grant on, and the waits of the candidates that
// lead only once the API server shows them (TestPluginWithFencingLeadsOnceAdmitted,
// TestAgentWithFencingLeadsOnceAdmitted).
type Fencing struct {
	Timing
	Handovers int `json:"handovers"`
	// AdmitSeconds are, per handover, the time from the new holder's
	// grant to its first admitted write; RefuseSeconds to the deposed
	// holder's first refused write.
	AdmitSeconds  []float64 `json:"admitSeconds"`
	RefuseSeconds []float64 `json:"refuseSeconds"`
	// DeposedWrites are the deposed holder's writes from the grant until
	// the first refused, DeposedAdmitted those admitted; HolderWrites are
	// the new holder's writes until its first admitted, HolderRefused
	// those refused. All handovers summed.
	DeposedWrites   int `json:"deposedWrites"`
	DeposedAdmitted int `json:"deposedAdmitted"`
	HolderWrites    int `json:"holderWrites"`
	HolderRefused   int `json:"holderRefused"`
	// Candidates are the plugin's and the agent's waits.
	Candidates []FencingCandidate `json:"candidates,omitempty"`
}

// FencingCandidate is one kind of candidate that leads only once
// admitted: WaitSeconds are, per handover, the time from the start of the
// handover (Handover says what that is) to leading. Its first write, made
// the instant it led, was admitted in each (the test fails otherwise).
type FencingCandidate struct {
	Method      string    `json:"method"` // plugin or agent
	Handover    string    `json:"handover"`
	WaitSeconds []float64 `json:"waitSeconds"`
}

// Sharding is what TestShardingAgainstLeaseBuckets of test/e2e writes to
// $SHARDING_JSON: our sharded lock and a Lease per bucket (client-go's
// leaderelection), side by side on the same shards and timing.
type Sharding struct {
	Timing
	Shards int `json:"shards"`
	// Sides are ours first, then the Lease buckets.
	Sides []ShardingSide `json:"sides"`
}

// ShardingSide is one side's figures: the move times in seconds of each
// shard moved, from the change to its new holder's start, on a 4th
// replica joining 3 (Up), leaving (Down) and one of the 3 crashing
// (Crash); the spread of shards per replica (most less fewest) after the
// join and after the crash; what it sent while idle; and the shards
// started while another term of them ran.
type ShardingSide struct {
	Name         string    `json:"name"`
	UpSeconds    []float64 `json:"upSeconds"`
	DownSeconds  []float64 `json:"downSeconds"`
	CrashSeconds []float64 `json:"crashSeconds"`
	SpreadUp     int       `json:"spreadUp"`
	SpreadCrash  int       `json:"spreadCrash"`
	// Replicas is how many replicas ran while idle.
	Replicas              int     `json:"replicas"`
	APIWritesPerMinute    float64 `json:"apiWritesPerMinute"`
	RedisScriptsPerMinute float64 `json:"redisScriptsPerMinute"`
	Overlaps              int     `json:"overlaps"`
}

// ShardedChaos is what TestShardedChaos of test/e2e writes to
// $SHARDED_CHAOS_JSON: the sharded operator example's replicas under
// faults, per Redis deployment, with its timing.
type ShardedChaos struct {
	Timing
	Shards      int                      `json:"shards"`
	Window      string                   `json:"window"` // CHAOS_DURATION per deployment
	Deployments []ShardedChaosDeployment `json:"deployments"`
}

// ShardedChaosDeployment is one deployment's run: the faults injected,
// the reconciles logged (those that ended as their shard's holder), the
// pairs of them of one object by two replicas at overlapping times, the
// token faults (a token on two replicas, or going down), and by fault
// kind the longest time some shard had no holder after it.
type ShardedChaosDeployment struct {
	Name           string             `json:"name"`
	Faults         int                `json:"faults"`
	Reconciles     int                `json:"reconciles"`
	Overlaps       int                `json:"overlaps"`
	TokenFaults    int                `json:"tokenFaults"`
	UnownedSeconds map[string]float64 `json:"unownedSeconds"`
}
