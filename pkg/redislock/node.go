package redislock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"k8s.io/utils/clock"
)

// node is one independent Redis deployment.
type node struct {
	// name identifies the node in errors and logs.
	name string
	// client is the caller's client.
	client redis.UniversalClient
	// pipe is client's deferred autopipeliner, nil where it has none (a
	// Ring). Its futures are waited on with the call's context: the blocking
	// face waits for the batch, and so for the connection's read timeout on
	// a server that stopped answering, however short the node timeout. On a
	// client of one server it is full duplex: replies are read while later
	// commands are written, on one held connection, instead of one batch
	// per round trip (8×GOMAXPROCS callers on 2 cores: 15% less wall time
	// per acquire+release). A Cluster's stays half duplex, whose redirects
	// the lock's tests cover.
	pipe *redis.AutoPipeliner
	// bounded says client honours context deadlines
	// (ContextTimeoutEnabled), so a call can run on the caller's goroutine
	// and still end by the node timeout.
	bounded bool
	// inflight counts calls under way, to pick pipe or client.
	inflight atomic.Int32
	// replicas is Options.WaitReplicas, and waitMs the WAIT timeout.
	replicas, waitMs int
	// sticky is client's source of dedicated connections when it is a
	// client of one server, cluster the client when it is a Cluster's:
	// where a write and its WAIT go (see replication.go). topo is what
	// WaitAllReplicas read of the replicas that may be promoted, and clock
	// times its reads and its waits.
	sticky  interface{ Conn() *redis.Conn }
	cluster *redis.ClusterClient
	topo    *topology
	clock   clock.PassiveClock
}

func newNode(name string, rc redis.UniversalClient, replicas int, timeout time.Duration, clk clock.PassiveClock) *node {
	n := &node{name: name, client: rc, replicas: replicas, waitMs: max(1, int(timeout.Milliseconds()/2)), clock: clk, topo: newTopology(rc, clk)}
	n.sticky, _ = rc.(interface{ Conn() *redis.Conn })
	n.cluster, _ = rc.(*redis.ClusterClient)
	if a, ok := rc.(interface {
		AsyncAutoPipelineWithOptions(*redis.AutoPipelineOptions) (*redis.AutoPipeliner, error)
	}); ok {
		o := redis.DefaultAutoPipelineOptions()
		o.FullDuplex = n.cluster == nil
		// An error (a closed client) leaves pipe nil: calls go one by one
		// and meet the client's own error.
		n.pipe, _ = a.AsyncAutoPipelineWithOptions(o)
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
// EVAL, which also loads it for the next EVALSHA. On a Redis Cluster it
// runs the script's sharded twin, whose events stay in the lock's shard.
func (n *node) eval(ctx context.Context, s *script, args []any) (any, error) {
	if n.cluster != nil && s.sharded != nil {
		s = s.sharded
		args = slices.Clone(args)
		args[1] = &s.sha
	}
	send := n.process
	if s.writes && n.replicas != 0 {
		send = n.processAndWait
	}
	v, err := send(ctx, args)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		args = slices.Clone(args)
		args[0], args[1] = "eval", &s.src
		v, err = send(ctx, args)
	}
	if err != nil && noScripting(err) {
		return v, fmt.Errorf("%w: %w", ErrNoScripting, err)
	}
	return v, err
}

// noScripting says err is a server's answer that it runs no scripts: an
// unknown EVALSHA or EVAL, or scripting disabled.
func noScripting(err error) bool {
	msg := strings.ToLower(err.Error())
	return (strings.HasPrefix(msg, "err unknown command") && (strings.Contains(msg, "'evalsha'") || strings.Contains(msg, "'eval'"))) ||
		strings.Contains(msg, "scripting is disabled")
}

// publish publishes message on a lock's events channel: with SPUBLISH on
// a Redis Cluster, where a PUBLISH would cross the cluster bus to every
// node, and with PUBLISH elsewhere.
func (n *node) publish(ctx context.Context, channel, message string) error {
	if n.cluster != nil {
		return n.cluster.SPublish(ctx, channel, message).Err()
	}
	return n.client.Publish(ctx, channel, message).Err()
}

// newSubscription opens a subscription to a lock's events channel: with
// SSUBSCRIBE on a Redis Cluster, on the master of the channel's slot, where
// the scripts' SPUBLISH delivers, and with SUBSCRIBE elsewhere.
func (n *node) newSubscription(ctx context.Context, channel string) *redis.PubSub {
	if n.cluster != nil {
		return n.cluster.SSubscribe(ctx, channel)
	}
	return n.client.Subscribe(ctx, channel)
}

// subscribe adds channels to sub, a subscription from newSubscription.
func (n *node) subscribe(ctx context.Context, sub *redis.PubSub, channels ...string) error {
	if n.cluster != nil {
		return sub.SSubscribe(ctx, channels...)
	}
	return sub.Subscribe(ctx, channels...)
}

// unsubscribe removes channels from sub, a subscription from
// newSubscription.
func (n *node) unsubscribe(ctx context.Context, sub *redis.PubSub, channels ...string) error {
	if n.cluster != nil {
		return sub.SUnsubscribe(ctx, channels...)
	}
	return sub.Unsubscribe(ctx, channels...)
}

// process sends one command. A lone call goes straight to the client, one
// round trip; calls that overlap others on this node go through the
// autopipeliner, which writes them together, so concurrent callers share
// round trips instead of queueing for connections. A pipelined call ends
// when ctx does, its command perhaps still queued: it keeps args, which
// the caller must then not reuse (fill's late).
func (n *node) process(ctx context.Context, args []any) (any, error) {
	cmd := redis.NewCmd(ctx, args...)
	cmd.SetFirstKeyPos(3)
	busy := n.inflight.Add(1) > 1
	defer n.inflight.Add(-1)
	if busy && n.pipe != nil {
		if err := n.pipe.Submit(ctx, cmd).WaitContext(ctx); ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return nil, err // the result may still land: not safe to read
		}
	} else {
		_ = n.client.Process(ctx, cmd)
	}
	return cmd.Result()
}
