package redislock

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// releaseWatches multiplexes one Client's release watches on one node over
// one subscription, as Redisson does: a lock's events channel is
// subscribed while at least one watch wants it, a release message wakes
// exactly the watches of its lock, and the subscription (one connection)
// exists only while something is watched. Ten thousand waiters on ten
// thousand names hold one connection per node, not ten thousand.
type releaseWatches struct {
	c *Client
	n *node

	mu sync.Mutex
	// sub is nil while nothing is watched; stop ends its keeper, which
	// closes done when it has returned.
	sub  *redis.PubSub
	stop context.CancelFunc
	done chan struct{}
	// watches are the wake-up channels of each events channel's watches.
	watches map[string]map[*releaseWatch]struct{}
	// outstanding counts each channel's SUBSCRIBEs not yet confirmed;
	// confirming are the watches waiting for the count to reach 0.
	outstanding map[string]int
	confirming  map[string][]chan struct{}
}

// releaseWatch is one WatchReleases call, on every node.
type releaseWatch struct{ wake chan struct{} }

func newReleaseWatches(c *Client, n *node) *releaseWatches {
	return &releaseWatches{c: c, n: n, watches: map[string]map[*releaseWatch]struct{}{}, outstanding: map[string]int{}, confirming: map[string][]chan struct{}{}}
}

// add makes w watch channel. The returned channel is closed once the node
// has confirmed the subscription (at once when another watch has it
// already). remove ends the watch.
func (r *releaseWatches) add(ctx context.Context, channel string, w *releaseWatch) (confirmed <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	done := make(chan struct{})
	ws := r.watches[channel]
	if ws == nil {
		ws = map[*releaseWatch]struct{}{}
		r.watches[channel] = ws
	}
	ws[w] = struct{}{}
	switch {
	case len(ws) > 1 && r.outstanding[channel] == 0:
		close(done)
		return done
	case len(ws) == 1:
		r.outstanding[channel]++
		// Sent under r.mu, so that the SUBSCRIBEs and UNSUBSCRIBEs of a
		// channel reach the node in the order of the counts. Without
		// ctx's deadline, which only bounds the wait for the confirmation:
		// go-redis drops the connection, every watch's, when a write
		// misses its context's deadline, and releases in the gap before
		// it is back go unheard.
		if r.sub == nil {
			r.start(ctx, channel)
		} else if err := r.sub.Subscribe(context.WithoutCancel(ctx), channel); err != nil {
			r.c.opts.Logger.V(1).Info("subscribe failed; the keeper subscribes again", "node", r.n.name, "error", err.Error())
		}
	}
	r.confirming[channel] = append(r.confirming[channel], done)
	return done
}

// start opens the subscription with its first channel and its keeper.
func (r *releaseWatches) start(ctx context.Context, channel string) {
	keep, stop := context.WithCancel(context.WithoutCancel(ctx))
	sub := r.n.client.Subscribe(keep, channel)
	r.sub, r.stop, r.done = sub, stop, make(chan struct{})
	done := r.done
	go func() {
		defer close(done)
		keepSubscription(keep, r.c.opts.Clock, r.c.opts.Logger, sub, func(ctx context.Context) error { return r.resubscribe(ctx, sub) }, r.wake, r.confirmed)
	}()
}

// resubscribe subscribes sub again to every watched channel, after the
// node refused a subscription.
func (r *releaseWatches) resubscribe(ctx context.Context, sub *redis.PubSub) error {
	r.mu.Lock()
	channels := make([]string, 0, len(r.watches))
	for ch := range r.watches {
		channels = append(channels, ch)
	}
	r.mu.Unlock()
	if len(channels) == 0 {
		return nil
	}
	return sub.Subscribe(ctx, channels...)
}

// wake wakes the watches of a released lock.
func (r *releaseWatches) wake(msg *redis.Message) {
	if msg.Payload != eventReleased {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for w := range r.watches[msg.Channel] {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// confirmed counts a node's confirmation of a SUBSCRIBE (the one a watch
// sent, or go-redis's own after a reconnection) and releases the watches
// that wait for their channel's.
func (r *releaseWatches) confirmed(m *redis.Subscription) {
	if m.Kind != "subscribe" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.outstanding[m.Channel] > 0 {
		r.outstanding[m.Channel]--
	}
	if r.outstanding[m.Channel] > 0 {
		return
	}
	for _, done := range r.confirming[m.Channel] {
		close(done)
	}
	delete(r.confirming, m.Channel)
	if r.watches[m.Channel] == nil {
		delete(r.outstanding, m.Channel)
	}
}

// remove ends w's watch of channel: the last watch of a channel
// unsubscribes it, and the last of all closes the subscription.
func (r *releaseWatches) remove(ctx context.Context, channel string, w *releaseWatch) {
	r.mu.Lock()
	ws := r.watches[channel]
	delete(ws, w)
	if len(ws) > 0 {
		r.mu.Unlock()
		return
	}
	delete(r.watches, channel)
	if len(r.watches) > 0 {
		if err := r.sub.Unsubscribe(ctx, channel); err != nil {
			r.c.opts.Logger.V(1).Info("unsubscribe failed", "node", r.n.name, "error", err.Error())
		}
		r.mu.Unlock()
		return
	}
	sub, stop, done := r.sub, r.stop, r.done
	r.sub, r.stop, r.done = nil, nil, nil
	r.outstanding, r.confirming = map[string]int{}, map[string][]chan struct{}{}
	r.mu.Unlock()
	stop()
	_ = sub.Close()
	<-done
}
