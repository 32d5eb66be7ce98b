package redislock

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/redislock/redislock/internal/lockevents"
)

// WatchReleases subscribes to the release messages of the lock called name
// on every node. The channel receives when the lock is released; it holds
// at most one pending signal, so a slow reader sees one wake-up for many
// releases. WatchReleases waits up to NodeTimeout per node for the
// subscription to be confirmed, so that a release right after it returns
// is not missed; it resubscribes after a node fault, and after the server
// refused a resubscription, with a PING per 30s of silence to find out. Call stop to unsubscribe.
func (c *Client) WatchReleases(ctx context.Context, name string) (wake <-chan struct{}, stop func()) {
	// stop ends the keepers too while they back off between resubscriptions.
	ctx, cancel := context.WithCancel(ctx)
	ch := make(chan struct{}, 1)
	channel := keysFor(c.opts.KeyPrefix, name).channel()
	subs := make([]*redis.PubSub, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		sub := n.client.Subscribe(ctx, channel)
		subs[i] = sub
		confirm, cancel := context.WithTimeout(ctx, c.opts.NodeTimeout)
		_, err := sub.Receive(confirm)
		cancel()
		if err != nil {
			c.opts.Logger.V(1).Info("subscription not confirmed; releases on this node are noticed at expiry until it is", "node", n.name, "error", err.Error())
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			lockevents.Keeper{Clock: c.opts.Clock, Log: c.opts.Logger}.Keep(ctx, sub, func(ctx context.Context) error { return sub.Subscribe(ctx, channel) }, func(msg *redis.Message) {
				if msg.Payload != "released" {
					return
				}
				select {
				case ch <- struct{}{}:
				default:
				}
			})
		}()
	}
	return ch, func() {
		cancel()
		for _, s := range subs {
			_ = s.Close()
		}
		wg.Wait()
	}
}
