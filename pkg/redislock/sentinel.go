package redislock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// SentinelNode is a node managed by Redis Sentinel: a client of its
// current master (redis.NewFailoverClient's), and clients of its Sentinels,
// which WaitAllReplicas asks which replicas may be promoted in the
// master's place. Pass it to New as the node; Close closes every client.
type SentinelNode struct {
	*redis.Client
	master    string
	sentinels []*redis.SentinelClient
}

// NewSentinelNode returns a SentinelNode for o: the master o.MasterName,
// through the Sentinels o.SentinelAddrs, with o's dialer, TLS, timeouts and
// Sentinel credentials for the Sentinels too.
func NewSentinelNode(o *redis.FailoverOptions) *SentinelNode {
	n := &SentinelNode{Client: redis.NewFailoverClient(o), master: o.MasterName}
	for _, addr := range o.SentinelAddrs {
		n.sentinels = append(n.sentinels, redis.NewSentinelClient(&redis.Options{
			Addr: addr, Dialer: o.Dialer, TLSConfig: o.TLSConfig,
			Username: o.SentinelUsername, Password: o.SentinelPassword,
			DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
			ContextTimeoutEnabled: o.ContextTimeoutEnabled, DialerRetries: o.DialerRetries,
			MaxRetries: o.MaxRetries, PoolSize: 2,
		}))
	}
	return n
}

// Close closes the master's client and the Sentinels'.
func (n *SentinelNode) Close() error {
	errs := []error{n.Client.Close()}
	for _, s := range n.sentinels {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

// promotable asks every Sentinel, at once, for the master's replicas, and
// returns them by address: true for those a Sentinel may promote. A
// replica is left out of the promotable only when no Sentinel that
// answered may promote it: every one has it subjectively or objectively
// down (s_down, o_down: sentinelSelectSlave skips those) or its
// replica-priority is 0. A Sentinel that does not answer is skipped; none
// answering is an error.
func (n *SentinelNode) promotable(ctx context.Context) (map[string]bool, error) {
	type answer struct {
		replicas []map[string]string
		err      error
	}
	answers := make([]answer, len(n.sentinels))
	var wg sync.WaitGroup
	for i, s := range n.sentinels {
		wg.Go(func() {
			answers[i].replicas, answers[i].err = s.Replicas(ctx, n.master).Result()
		})
	}
	wg.Wait()
	out := map[string]bool{}
	var errs []error
	answered := false
	for i, a := range answers {
		if a.err != nil {
			errs = append(errs, fmt.Errorf("sentinel %s: %w", n.sentinels[i].String(), a.err))
			continue
		}
		answered = true
		for _, r := range a.replicas {
			addr := net.JoinHostPort(r["ip"], r["port"])
			if r["port"] == "0" {
				continue // a backup or sync tool, never promoted
			}
			out[addr] = out[addr] || sentinelMayPromote(r)
		}
	}
	if !answered {
		return nil, fmt.Errorf("ask the Sentinels for the replicas of %s: %w", n.master, errors.Join(errs...))
	}
	return out, nil
}

// sentinelMayPromote says whether a Sentinel that lists replica r (a
// SENTINEL REPLICAS entry) may promote it.
func sentinelMayPromote(r map[string]string) bool {
	for f := range strings.SplitSeq(r["flags"], ",") {
		if f == "s_down" || f == "o_down" {
			return false
		}
	}
	p, ok := r["replica-priority"]
	if !ok {
		p = r["slave-priority"]
	}
	prio, err := strconv.Atoi(p)
	return err != nil || prio != 0
}

// isFailoverClient says rc is redis.NewFailoverClient's: a client of a
// Sentinel-managed master that cannot ask the Sentinels anything.
func isFailoverClient(rc redis.UniversalClient) bool {
	c, ok := rc.(*redis.Client)
	return ok && c.Options().Addr == "FailoverClient"
}
