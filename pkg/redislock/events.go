package redislock

import (
	"context"
	"sync"
)

// eventReleased is what a release or force-release publishes on the
// lock's events channel, KeyPrefix + "{<name>}:events" (see keys.go), and
// eventAcquired what a grant publishes once it counts (with WaitReplicas,
// once the replicas acknowledged it; with Redlock, once a majority granted
// it). A Client's watches are the only
// readers of these channels in this module: nothing else spells their
// names. On a Redis Cluster they are shard channels (SPUBLISH), which stay
// within the shard of the lock's slot.
const (
	eventReleased = "released"
	eventAcquired = "acquired"
)

// announceGrant publishes l's grant on the nodes in took, in the
// background, when acquire.lua did not (WaitReplicas, Redlock): a grant
// counts only once the replicas acknowledged it or a majority of nodes
// granted it, and one that did not, which is given back, must wake no
// watcher, or a controller would show for an instant a holder that never
// held. It logs what it could not reach; the watchers
// there notice the grant at their next look.
func (c *Client) announceGrant(ctx context.Context, l *Lock, took []int) {
	if c.announce == "1" {
		return
	}
	// Apart, so that the scripts' case does not pay for what the
	// goroutines capture (ctx escapes: one allocation per grant).
	c.publishGrant(context.WithoutCancel(ctx), l, took)
}

// publishGrant publishes l's grant on the nodes took, each from a
// goroutine of its own.
func (c *Client) publishGrant(ctx context.Context, l *Lock, took []int) {
	channel := l.keys.channel()
	for _, i := range took {
		go func() {
			call, cancel := context.WithTimeout(ctx, c.opts.NodeTimeout)
			defer cancel()
			if err := c.nodes[i].publish(call, channel, eventAcquired); err != nil {
				c.opts.Logger.V(1).Info("could not announce a grant; watchers notice it at their next look", "lock", l.keys.name, "node", c.nodes[i].name, "error", err.Error())
			}
		}()
	}
}

// WatchReleases subscribes to the release messages of the lock called name
// on every node. The channel receives when the lock is released; it holds
// at most one pending signal, so a slow reader sees one wake-up for many
// releases. WatchReleases waits up to NodeTimeout per node for the
// subscription to be confirmed, so that a release right after it returns
// is not missed; it resubscribes after a node fault, and after the server
// refused a resubscription, with a PING per 30s of silence to find out.
// The watches of one Client share one subscription (one connection) per
// node, whatever their number and names; on a Redis Cluster, one per
// shard that serves a watched name, where the releases are published
// (SPUBLISH). Call stop to unsubscribe.
func (c *Client) WatchReleases(ctx context.Context, name string) (wake <-chan struct{}, stop func()) {
	w := &releaseWatch{wake: make(chan struct{}, 1)}
	return w.wake, c.watch(ctx, name, w)
}

// WatchEvents subscribes to the events of the lock called name on every
// node, and calls handle at each grant and each release (force-releases
// included), one call at a time per subscription. A grant that replicas
// refused (WaitReplicas), or that won no majority (Redlock), and was given
// back calls nothing. A lock held
// across several nodes announces on each, so handle may be called once
// per node for one change. It waits for the subscription to be confirmed,
// keeps it alive and shares it with the Client's other watches, as
// WatchReleases does. handle must return promptly and must not call stop.
// Call stop to unsubscribe; handle is not called after stop returns.
func (c *Client) WatchEvents(ctx context.Context, name string, handle func()) (stop func()) {
	return c.watch(ctx, name, &releaseWatch{handle: handle})
}

// watchTurn is WatchReleases for ObtainWait: a release wakes the Client's
// waiters of the lock one at a time, in turn, instead of all of them. A
// woken waiter that does not try again must call stop(true), which hands
// the wake-up on to the next one, so that a release is never swallowed by
// a waiter that left; stop(false) ends the watch otherwise.
func (c *Client) watchTurn(ctx context.Context, name string) (w *releaseWatch, stop func(passOn bool)) {
	w = &releaseWatch{wake: make(chan struct{}, 1), queued: true}
	end := c.watch(ctx, name, w)
	channel := keysFor(c.opts.KeyPrefix, name).channel()
	return w, func(passOn bool) {
		end()
		if passOn && w.owed.Load() {
			for _, r := range c.releases {
				r.passTurn(channel)
			}
		}
	}
}

// watch adds w to the watches of the lock called name on every node,
// waiting up to NodeTimeout per node for the subscription to be
// confirmed, and returns the function that ends it.
func (c *Client) watch(ctx context.Context, name string, w *releaseWatch) (stop func()) {
	channel := keysFor(c.opts.KeyPrefix, name).channel()
	for i, r := range c.releases {
		confirm, cancel := context.WithTimeout(ctx, c.opts.NodeTimeout)
		select {
		case <-r.add(confirm, channel, w):
		case <-confirm.Done():
			c.opts.Logger.V(1).Info("subscription not confirmed; events on this node are noticed at expiry until it is", "node", c.nodes[i].name, "error", confirm.Err().Error())
		}
		cancel()
	}
	// stop holds on to nothing of ctx: a watch can outlive its caller by
	// far (the controller's, one per lock), and ctx's values with it.
	var once sync.Once
	return func() {
		once.Do(func() {
			for _, r := range c.releases {
				r.remove(context.Background(), channel, w)
			}
			w.end()
		})
	}
}
