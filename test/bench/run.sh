#!/usr/bin/env bash
# `make bench`: runs every benchmark and writes the report.
#  1. The interleaved lock measurement of this module (TestInterleaved:
#     INTERLEAVED_ROUNDS rounds of INTERLEAVED_SLOT per implementation,
#     with the servers' CPU and commands per op), saved as
#     $OUT/interleaved.json, then its lock benchmarks, saved as
#     $OUT/bench.txt, then TestWaiters (many ObtainWait waiters on one
#     Client), saved as $OUT/waiters.json, then TestClusterEvents (the
#     cluster-bus messages of grants and releases on a Redis Cluster),
#     saved as $OUT/clusterevents.json.
#  2. In the main module, against envtest: TestControllerBenchmark,
#     TestControllerAmongHostileTenants, TestFailoverBenchmark (shorter
#     than `make bench-failover`), TestLeadershipThroughAPIServerOutage,
#     TestSteadyStateBenchmark, the fencing tests (TestFencingPolicy*,
#     Test*WithFencingLeadsOnceAdmitted), TestShardingAgainstLeaseBuckets
#     and TestShardedChaos (SHARDED_CHAOS_DURATION per Redis deployment),
#     saved as $OUT/controller.json, $OUT/hostile.json, $OUT/failover.json,
#     $OUT/outage.json, $OUT/steady.json, $OUT/fencing.json,
#     $OUT/sharding.json and $OUT/sharded-chaos.json.
#  3. cmd/benchreport, which prints the lock tables and writes
#     $OUT/REPORT.md and its PNG plots.
# If step 2 fails, the report still covers what finished, and the run fails.
#
# INTERLEAVED_ROUNDS, INTERLEAVED_SLOT
#                         rounds and time per implementation and round (10, 500ms)
# COUNT, BENCHTIME        -count and -benchtime of the lock benchmarks (3, 1s)
# CONTROLLER_BENCH_LOCKS  counts of RedisLocks for the controller (1000,5000,10000)
# CONTROLLER_BENCH_BACKENDS, CONTROLLER_BENCH_WINDOW
#                         see test/e2e/controller_bench_test.go (single,cluster, 60s)
# WAITERS_HANDOVERS, WAITERS_NAMES, WAITERS_HERD
#                         see waiters_test.go (200, 10000, 1000)
# FAILOVER_TRIALS, FAILOVER_DURATIONS, FAILOVER_IDLE_WINDOW
#                         see test/e2e/failover_bench_test.go (8, 4s,3s,1s, 60s)
# STEADY_CANDIDATES, STEADY_DURATIONS, STEADY_WINDOW
#                         see test/e2e/steady_bench_test.go (1,5,20,
#                         15s,10s,2s: controller-runtime's defaults, 60s)
# SHARDED_CHAOS_DURATION  the sharded chaos run per Redis deployment, of
#                         three (10m: #45's goal; about 35 minutes in all)
# OUT                     the report's directory, emptied of an earlier
#                         report first (docs/bench)
set -euo pipefail
cd "$(dirname "$0")"
root=$(cd ../.. && pwd)
out=${OUT:-$root/docs/bench}
count=${COUNT:-3}
export INTERLEAVED_ROUNDS=${INTERLEAVED_ROUNDS:-10}
export INTERLEAVED_SLOT=${INTERLEAVED_SLOT:-500ms}
benchtime=${BENCHTIME:-1s}
export CONTROLLER_BENCH_LOCKS=${CONTROLLER_BENCH_LOCKS:-1000,5000,10000}
export CONTROLLER_BENCH_BACKENDS=${CONTROLLER_BENCH_BACKENDS:-single,cluster}
export CONTROLLER_BENCH_WINDOW=${CONTROLLER_BENCH_WINDOW:-60s}
export WAITERS_HANDOVERS=${WAITERS_HANDOVERS:-200}
export WAITERS_NAMES=${WAITERS_NAMES:-10000}
export WAITERS_HERD=${WAITERS_HERD:-1000}
export FAILOVER_TRIALS=${FAILOVER_TRIALS:-8}
export FAILOVER_DURATIONS=${FAILOVER_DURATIONS:-4s,3s,1s}
export FAILOVER_IDLE_WINDOW=${FAILOVER_IDLE_WINDOW:-60s}
export STEADY_CANDIDATES=${STEADY_CANDIDATES:-1,5,20}
export STEADY_DURATIONS=${STEADY_DURATIONS:-15s,10s,2s}
export STEADY_WINDOW=${STEADY_WINDOW:-60s}
sharded_chaos=${SHARDED_CHAOS_DURATION:-10m}
command="make bench (INTERLEAVED_ROUNDS=$INTERLEAVED_ROUNDS INTERLEAVED_SLOT=$INTERLEAVED_SLOT COUNT=$count BENCHTIME=$benchtime CONTROLLER_BENCH_LOCKS=$CONTROLLER_BENCH_LOCKS CONTROLLER_BENCH_BACKENDS=$CONTROLLER_BENCH_BACKENDS CONTROLLER_BENCH_WINDOW=$CONTROLLER_BENCH_WINDOW WAITERS_HANDOVERS=$WAITERS_HANDOVERS WAITERS_NAMES=$WAITERS_NAMES WAITERS_HERD=$WAITERS_HERD FAILOVER_TRIALS=$FAILOVER_TRIALS FAILOVER_DURATIONS=$FAILOVER_DURATIONS FAILOVER_IDLE_WINDOW=$FAILOVER_IDLE_WINDOW STEADY_CANDIDATES=$STEADY_CANDIDATES STEADY_DURATIONS=$STEADY_DURATIONS STEADY_WINDOW=$STEADY_WINDOW SHARDED_CHAOS_DURATION=$sharded_chaos)"
started=$(date +%s)
source=$(git -C "$root" describe --always --dirty)

mkdir -p "$out"
# A part that does not finish must not be reported from an earlier run.
rm -f "$out/REPORT.md" "$out/interleaved.json" "$out/bench.txt" "$out/controller.json" "$out/hostile.json" "$out/waiters.json" "$out/clusterevents.json" "$out/failover.json" "$out/outage.json" "$out/steady.json" "$out/fencing.json" "$out/sharding.json" "$out/sharded-chaos.json" "$out"/*.png

INTERLEAVED_JSON="$out/interleaved.json" go test -count=1 -timeout 30m -run '^TestInterleaved$' -v .
go test -run '^$' -bench . -benchmem -count "$count" -benchtime "$benchtime" . | tee "$out/bench.txt"
WAITERS_JSON="$out/waiters.json" go test -count=1 -timeout 30m -run '^TestWaiters$' -v .
CLUSTER_EVENTS_JSON="$out/clusterevents.json" go test -count=1 -timeout 10m -run '^TestClusterEvents$' -v .

e2e=0
(cd "$root" && CONTROLLER_BENCH_JSON="$out/controller.json" HOSTILE_BENCH_JSON="$out/hostile.json" FAILOVER_JSON="$out/failover.json" OUTAGE_JSON="$out/outage.json" STEADY_JSON="$out/steady.json" FENCING_JSON="$out/fencing.json" SHARDING_BENCH=1 SHARDING_JSON="$out/sharding.json" \
	SHARDED_CHAOS_JSON="$out/sharded-chaos.json" CHAOS_DURATION="$sharded_chaos" \
	go test -count=1 -timeout 150m -run '^(TestControllerBenchmark|TestControllerAmongHostileTenants|TestFailoverBenchmark|TestLeadershipThroughAPIServerOutage|TestSteadyStateBenchmark|TestFencingPolicyAdmitsOnlyTheHolder|TestPluginWithFencingLeadsOnceAdmitted|TestAgentWithFencingLeadsOnceAdmitted|TestShardingAgainstLeaseBuckets|TestShardedChaos)$' -v ./test/e2e/) || e2e=$?

go run ./cmd/benchreport -dir "$out" -command "$command" -source "$source" -elapsed "$(($(date +%s) - started))s"
exit "$e2e"
