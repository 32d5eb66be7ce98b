package redislock

import (
	"context"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// eventReleased is what a release or force-release publishes on the
// lock's events channel, KeyPrefix + "{<name>}:events" (see keys.go), and
// eventAcquired what a grant publishes once it counts (with WaitReplicas,
// once the replicas acknowledged it). A Client's watches are the only
// readers of these channels in this module: nothing else spells their
// names.
const (
	eventReleased = "released"
	eventAcquired = "acquired"
)

// announceGrant publishes l's grant on the nodes in took, in the
// background, when acquire.lua did not (WaitReplicas): a grant counts only
// once the replicas acknowledged it, and one they refused, which is given
// back, must wake no watcher, or a controller would show for an instant a
// holder that never held. It logs what it could not reach; the watchers
// there notice the grant at their next look.
func (c *Client) announceGrant(ctx context.Context, l *Lock, took []int) {
	if c.announce == "1" {
		return
	}
	ctx = context.WithoutCancel(ctx)
	channel := l.keys.channel()
	for _, i := range took {
		go func() {
			call, cancel := context.WithTimeout(ctx, c.opts.NodeTimeout)
			defer cancel()
			if err := c.nodes[i].client.Publish(call, channel, eventAcquired).Err(); err != nil {
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
// node, whatever their number and names. Call stop to unsubscribe.
func (c *Client) WatchReleases(ctx context.Context, name string) (wake <-chan struct{}, stop func()) {
	channel := keysFor(c.opts.KeyPrefix, name).channel()
	w := &releaseWatch{wake: make(chan struct{}, 1)}
	for i, r := range c.releases {
		confirm, cancel := context.WithTimeout(ctx, c.opts.NodeTimeout)
		select {
		case <-r.add(confirm, channel, w):
		case <-confirm.Done():
			c.opts.Logger.V(1).Info("subscription not confirmed; releases on this node are noticed at expiry until it is", "node", c.nodes[i].name, "error", confirm.Err().Error())
		}
		cancel()
	}
	var once sync.Once
	return w.wake, func() {
		once.Do(func() {
			for _, r := range c.releases {
				r.remove(context.WithoutCancel(ctx), channel, w)
			}
		})
	}
}

// WatchEvents subscribes, on every node, to the events of every lock under
// this Client's KeyPrefix, and calls handle with the lock's name at each
// grant and each release (force-releases included), one call at a time per
// node. A grant that replicas refused (WaitReplicas) and was given back
// calls nothing. It waits up to NodeTimeout per node for each subscription to be
// confirmed, and keeps each alive as WatchReleases does.
// A lock held across several nodes announces on each, so handle may be
// called once per node for one change. Call stop to unsubscribe; handle is
// not called after stop returns.
func (c *Client) WatchEvents(ctx context.Context, handle func(name string)) (stop func()) {
	pattern := eventsPattern(c.opts.KeyPrefix)
	onMessage := func(msg *redis.Message) {
		if name, ok := lockOfChannel(c.opts.KeyPrefix, msg.Channel); ok {
			handle(name)
		}
	}
	// stop ends the keepers too while they back off between resubscriptions.
	ctx, cancel := context.WithCancel(ctx)
	subs := make([]*redis.PubSub, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		sub := n.client.PSubscribe(ctx, pattern)
		subs[i] = sub
		confirm, cancelConfirm := context.WithTimeout(ctx, c.opts.NodeTimeout)
		_, err := sub.Receive(confirm)
		cancelConfirm()
		if err != nil {
			c.opts.Logger.V(1).Info("subscription not confirmed; events on this node are noticed at expiry until it is", "node", n.name, "error", err.Error())
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			keepSubscription(ctx, c.opts.Clock, c.opts.Logger, sub, func(ctx context.Context) error { return sub.PSubscribe(ctx, pattern) }, onMessage, nil)
		}()
	}
	return func() {
		cancel()
		for _, s := range subs {
			_ = s.Close()
		}
		wg.Wait()
	}
}

// eventsPattern is a PSUBSCRIBE pattern that matches the events channel of
// every lock under prefix, and no other key's name: prefix's glob
// characters are escaped, and lock names hold no braces.
func eventsPattern(prefix string) string {
	var b strings.Builder
	for _, r := range prefix {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String() + "{*}" + eventsSuffix
}

// lockOfChannel returns the name of the lock under prefix whose events
// channel is channel, and false for any other channel.
func lockOfChannel(prefix, channel string) (string, bool) {
	name, ok := strings.CutPrefix(channel, prefix+"{")
	if !ok {
		return "", false
	}
	name, ok = strings.CutSuffix(name, "}"+eventsSuffix)
	return name, ok && checkName(name) == nil
}
