package redislock

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// WaitAllReplicas, as Options.WaitReplicas, makes every acquire, renew
// and fencing write wait until every replica that its node reports online
// (INFO replication, read in the same round trip as the write) has
// acknowledged it. Unlike a fixed count, it follows the replicas there
// are: after a failover the new master has one replica fewer until the old
// master rejoins, and a fixed count equal to the replicas of before would
// fail every write until then. A replica still in its first sync (not yet
// online) is not waited for. It needs clients of one server
// (redis.NewClient, redis.NewFailoverClient), not Cluster clients.
const WaitAllReplicas = -1

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

// processAndWaitAll sends INFO replication, one command and a WAIT for
// the replicas online at the last write, on one connection, in one round
// trip; if INFO reports more replicas online than that WAIT asked for (one
// came online) and fewer acknowledged, a second WAIT asks for all of them. Too few
// acknowledgements within half the node timeout make the call fail.
func (n *node) processAndWaitAll(ctx context.Context, args []any) (any, error) {
	conn := n.sticky.Conn()
	defer func() { _ = conn.Close() }()
	info := redis.NewStringCmd(ctx, "info", "replication")
	cmd := redis.NewCmd(ctx, args...)
	cmd.SetFirstKeyPos(3)
	asked := int64(n.online.Load())
	wait := redis.NewIntCmd(ctx, "wait", asked, n.waitMs)
	_, _ = conn.Pipelined(ctx, func(p redis.Pipeliner) error {
		_ = p.Process(ctx, info)
		_ = p.Process(ctx, cmd)
		return p.Process(ctx, wait)
	})
	v, err := cmd.Result()
	if err != nil {
		return v, err
	}
	text, err := info.Result()
	if err != nil {
		return nil, fmt.Errorf("count the online replicas: %w", err)
	}
	online := onlineReplicas(text)
	n.online.Store(int32(online))
	acked, err := wait.Result()
	if err == nil && acked < int64(online) && asked < int64(online) {
		acked, err = conn.Do(ctx, "wait", online, n.waitMs).Int64()
	}
	if err != nil {
		return nil, fmt.Errorf("wait for replicas: %w", err)
	}
	if acked < int64(online) {
		return nil, fmt.Errorf("%w: %d of the %d online replicas acknowledged the write within %dms", ErrReplication, acked, online, n.waitMs)
	}
	return v, nil
}

// onlineReplicas counts the replicas that INFO replication reports
// online ("slave0:ip=...,port=...,state=online,...").
func onlineReplicas(info string) int {
	n := 0
	for line := range strings.Lines(info) {
		if strings.HasPrefix(line, "slave") && strings.Contains(line, ",state=online,") {
			n++
		}
	}
	return n
}
