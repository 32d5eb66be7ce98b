// Package agent is the `redislock agent` sidecar: it campaigns for one
// RedisLock with the lock engine's Elector, as its pod, and tells the app
// and the cluster who leads, so a workload in any language gets leader
// election without linking a library.
//
// Outputs:
//   - GET /leader: JSON (see leaderhttp.Status); 200 while this pod leads, else 503,
//     so it serves as a readiness probe. The answer is decided from one
//     reading of the clock against the local step-down deadline, so it
//     turns 503 at that deadline even when Redis is unreachable, and the
//     first answer after a pause longer than the deadline is 503 (S1 at the
//     endpoint). observedAt says which instant the answer is true of.
//   - GET /healthz (the process serves) and GET /metrics (Prometheus).
//   - Optionally the pod label redislock.io/leader=true|false, patched on
//     every change, for Service selectors and `kubectl get pods -l`.
//   - Optionally a file with the /leader JSON, rewritten on every change
//     and every renew interval. An app that reads it must itself compare
//     validUntil with its clock: a file cannot turn false by itself.
//
// What a client can hold of the agent is bounded, so that no client (any
// pod that reaches the port) can take its memory: each HTTP server holds
// at most Options.MaxConnections connections, /leader at most
// Options.MaxLongPolls long polls (one more is answered at once, not
// held), and a request's headers, its reading, its answer's writing and a
// kept-alive connection's idleness are bounded in time. Not guaranteed: a
// client that keeps the connection cap full delays that server's other
// clients, the kubelet's probes included; Options.ProbeAddr, with Addr on
// 127.0.0.1, gives the probes a server of their own.
//
// The label and the file are reports, written after the fact; only
// /leader (and the app's own check of validUntil) is exact. On SIGTERM the
// agent releases the lock at once, so a standby takes over within a round
// trip, and exits.
package agent
