package redislock

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// node is one independent Redis deployment.
type node struct {
	// name identifies the node in errors and logs.
	name string
	// client is the caller's client.
	client redis.UniversalClient
	// pipe is client's autopipeliner, nil where it has none (a Ring).
	pipe *redis.AutoPipeliner
	// bounded says client honours context deadlines
	// (ContextTimeoutEnabled), so a call can run on the caller's goroutine
	// and still end by the node timeout.
	bounded bool
	// inflight counts calls under way, to pick pipe or client.
	inflight atomic.Int32
	// replicas is Options.WaitReplicas, and waitMs the WAIT timeout.
	replicas, waitMs int
}

func newNode(name string, rc redis.UniversalClient, replicas int, timeout time.Duration) *node {
	n := &node{name: name, client: rc, replicas: replicas, waitMs: max(1, int(timeout.Milliseconds()/2))}
	if ap, err := rc.AutoPipeline(); err == nil {
		n.pipe = ap
	}
	switch o := rc.(type) {
	case interface{ Options() *redis.Options }:
		n.bounded = o.Options().ContextTimeoutEnabled
	case interface{ Options() *redis.ClusterOptions }:
		n.bounded = o.Options().ContextTimeoutEnabled
	}
	return n
}

// eval runs the script call laid out by script.args and returns its reply;
// on NOSCRIPT (after a restart or SCRIPT FLUSH) it sends the source with
// EVAL, which also loads it for the next EVALSHA.
func (n *node) eval(ctx context.Context, s *script, args []any) (any, error) {
	send := n.process
	if s.writes && n.replicas > 0 {
		send = n.processAndWait
	}
	v, err := send(ctx, args)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		args = slices.Clone(args)
		args[0], args[1] = "eval", &s.src
		return send(ctx, args)
	}
	return v, err
}

// processAndWait sends one command and a WAIT for n.replicas replicas on
// one connection (WAIT covers that connection's writes), in one round
// trip. Too few acknowledgements within half the node timeout (the other
// half is for the round trip) make the call fail.
func (n *node) processAndWait(ctx context.Context, args []any) (any, error) {
	cmd := redis.NewCmd(ctx, args...)
	cmd.SetFirstKeyPos(3)
	wait := redis.NewIntCmd(ctx, "wait", n.replicas, n.waitMs)
	_, _ = n.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		_ = p.Process(ctx, cmd)
		return p.Process(ctx, wait)
	})
	v, err := cmd.Result()
	if err != nil {
		return v, err
	}
	acked, err := wait.Result()
	if err != nil {
		return nil, fmt.Errorf("wait for replicas: %w", err)
	}
	if acked < int64(n.replicas) {
		return nil, fmt.Errorf("%w: %d of %d replicas acknowledged the write within %dms", ErrReplication, acked, n.replicas, n.waitMs)
	}
	return v, nil
}

// process sends one command. A lone call goes straight to the client, one
// round trip; calls that overlap others on this node go through the
// autopipeliner, which writes them together, so concurrent callers share
// round trips instead of queueing for connections.
func (n *node) process(ctx context.Context, args []any) (any, error) {
	cmd := redis.NewCmd(ctx, args...)
	cmd.SetFirstKeyPos(3)
	busy := n.inflight.Add(1) > 1
	defer n.inflight.Add(-1)
	if busy && n.pipe != nil {
		_ = n.pipe.Process(ctx, cmd)
	} else {
		_ = n.client.Process(ctx, cmd)
	}
	return cmd.Result()
}
