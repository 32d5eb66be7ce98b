// Package inject is the mutating admission webhook that adds the redislock
// agent to pods: a pod whose annotation redislock.io/lock names a RedisLock
// in its namespace gets the agent as a native sidecar (an init container
// with restartPolicy Always), so every replica campaigns for that lock and
// the app asks http://127.0.0.1:8090/leader (or reads
// /var/run/redislock/leader.json) whether it leads.
//
// Decisions:
//   - Pods, not Deployments, are mutated: a workload's manifest stays as
//     written (no drift for GitOps tools), and every pod that carries the
//     annotation gets the agent, whatever created it.
//   - A pod whose annotation names a RedisLock that does not exist, or is
//     not a valid name, is rejected with a message naming the annotation
//     and the lock. Admitting it untouched would start the app with nobody
//     to tell it who leads, which is silent; a rejected pod shows in the
//     ReplicaSet's events, and its controller retries, so creating the
//     RedisLock afterwards heals it. A RedisLock that exists but is not
//     Ready admits the pod with a warning: the agent waits for it.
//   - Injection is idempotent: a pod that already has the agent container
//     is admitted unchanged.
//   - The agent's probes are startup and liveness on /healthz; the pod's
//     readiness is left alone, so rollouts and disruption budgets work as
//     before. To route a Service to the leader alone, select the label
//     redislock.io/leader=true, or give the app container a readiness probe
//     on the agent's /leader.
//   - /leader is served on every address unless redislock.io/agent-probe-port
//     moves the probes and /metrics to a port of their own and keeps
//     /leader on 127.0.0.1: other pods (and tools that read the agents'
//     /leader from outside, as the chaos checker does) would lose it by
//     default, and a readiness probe on /leader needs it on the pod's
//     address.
package inject
