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

	"github.com/redislock/redislock/internal/testing/benchresult"
)

// The inputs the benchmark tests write, by the names this report uses.
type (
	timing            = benchresult.Timing
	failover          = benchresult.Failover
	failoverMethod    = benchresult.FailoverMethod
	controllerScale   = benchresult.ControllerScale
	controllerRun     = benchresult.ControllerRun
	hostileTenants    = benchresult.HostileTenants
	waiters           = benchresult.Waiters
	waitersScenario   = benchresult.WaitersScenario
	clusterEvents     = benchresult.ClusterEvents
	clusterEventsCase = benchresult.ClusterEventsCase
	steadyState       = benchresult.SteadyState
	steadyCase        = benchresult.SteadyCase
	outage            = benchresult.Outage
	outageMethod      = benchresult.OutageMethod
	fencing           = benchresult.Fencing
	fencingCandidate  = benchresult.FencingCandidate
	sharding          = benchresult.Sharding
	shardingSide      = benchresult.ShardingSide
	shardedChaos      = benchresult.ShardedChaos
	chaosDeployment   = benchresult.ShardedChaosDeployment
)

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
