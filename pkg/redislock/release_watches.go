package redislock

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"k8s.io/utils/clock"
)

// releaseWatches multiplexes one Client's watches (WatchReleases and
// WatchEvents) on one node, as Redisson does: a lock's events channel is
// subscribed while at least one watch wants it, a message wakes exactly
// the watches of its lock, and a subscription (one connection) exists only
// while something is watched, and for subscriptionLinger after. Ten
// thousand waiters on ten thousand names hold one connection per node, not
// ten thousand.
//
// On a Redis Cluster the scripts publish with SPUBLISH, which stays within
// the shard of the lock's slot, so the channels are subscribed with
// SSUBSCRIBE on the master of that shard: one subscription per shard that
// serves a watched lock. A channel whose slot moved to another shard
// (failover, migration: the server unsubscribes it, or refuses it with
// MOVED) is subscribed again where its slot now lives.
type releaseWatches struct {
	c *Client
	n *node

	mu sync.Mutex
	// shards are the open subscriptions: by the address of the shard's
	// master on a Redis Cluster, and under "" on any other node.
	shards map[string]*shardSub
	// watches are each events channel's watches (a slice: most channels
	// have one, and a map each would cost more than the watch), and
	// shardOf the key of the shard that subscribes it.
	watches map[string][]*releaseWatch
	shardOf map[string]string
	// outstanding counts each channel's SUBSCRIBEs not yet confirmed;
	// confirming are the watches waiting for the count to reach 0.
	outstanding map[string]int
	confirming  map[string][]chan struct{}
	// turns are each channel's queued watches (ObtainWait's) in the order
	// releases wake them: one each, the woken one moving to the end.
	turns map[string][]*releaseWatch
}

// subscriptionLinger is how long a subscription (its connection) stays
// open once nothing is watched on it; its channels are unsubscribed at
// once. Waiters that come and go (ObtainWait in a loop, the goroutines of
// one process taking turns on a lock) would otherwise dial and
// authenticate a new connection each time the last one leaves: with two
// goroutines taking turns on one lock, once per eight handovers, a fifth
// of their time. It is shorter than checkEvery, and the UNSUBSCRIBE's
// confirmation restarts keepSubscription's silence, so an idle
// subscription sends no PING before it closes. Not on a Redis Cluster:
// there the reply to our own SUNSUBSCRIBE reads as the server dropping a
// moved channel, and a connection with no channel that reconnects goes to
// a random node, not the shard's master.
const subscriptionLinger = 5 * time.Second

// shardSub is one subscription and its keeper; stop ends the keeper,
// which closes the subscription and then done. idle is the timer that
// closes it while no channel is subscribed on it, and lingers counts
// those timers, so that one stopped too late closes nothing.
type shardSub struct {
	sub      *redis.PubSub
	stop     context.CancelFunc
	done     chan struct{}
	channels int
	idle     clock.Timer
	lingers  int
}

// releaseWatch is one WatchReleases or WatchEvents call, on every node: a
// release signals wake (WatchReleases), or calls handle, as a grant does
// too (WatchEvents). A queued watch (ObtainWait's) is woken only in its
// turn among the Client's queued watches of its lock, one per release:
// waiters in one process would race each other for the lock, and all but
// one lose; owed says it was woken and has not acted on it yet.
type releaseWatch struct {
	wake   chan struct{}
	queued bool
	owed   atomic.Bool

	mu      sync.Mutex // held while handle runs
	handle  func()
	stopped bool
}

// notify tells w of an event: released says it is a release.
func (w *releaseWatch) notify(released bool) {
	if w.handle == nil {
		if released {
			w.signal()
		}
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		w.handle()
	}
}

// signal wakes w, unless a wake-up is pending already.
func (w *releaseWatch) signal() {
	if w.queued {
		w.owed.Store(true)
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// end makes sure handle is neither running nor called again.
func (w *releaseWatch) end() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
}

func newReleaseWatches(c *Client, n *node) *releaseWatches {
	return &releaseWatches{c: c, n: n, shards: map[string]*shardSub{}, watches: map[string][]*releaseWatch{}, shardOf: map[string]string{}, outstanding: map[string]int{}, confirming: map[string][]chan struct{}{}, turns: map[string][]*releaseWatch{}}
}

// add makes w watch channel. The returned channel is closed once the node
// has confirmed the subscription (at once when another watch has it
// already). remove ends the watch.
func (r *releaseWatches) add(ctx context.Context, channel string, w *releaseWatch) (confirmed <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	done := make(chan struct{})
	ws := append(r.watches[channel], w)
	r.watches[channel] = ws
	if w.queued {
		r.turns[channel] = append(r.turns[channel], w)
	}
	switch {
	case len(ws) > 1 && r.outstanding[channel] == 0:
		close(done)
		return done
	case len(ws) == 1:
		r.attach(ctx, channel)
	}
	r.confirming[channel] = append(r.confirming[channel], done)
	return done
}

// attach subscribes channel on the subscription of its shard, which it
// opens when there is none. r.mu is held: the SUBSCRIBEs and UNSUBSCRIBEs
// of a channel reach the node in the order of the counts. They are sent
// without ctx's deadline, which only bounds the wait for the confirmation
// and the lookup of the shard: go-redis drops the connection, every
// watch's, when a write misses its context's deadline, and releases in
// the gap before it is back go unheard.
func (r *releaseWatches) attach(ctx context.Context, channel string) {
	key := r.shardKey(ctx, channel)
	r.outstanding[channel]++
	r.shardOf[channel] = key
	if s := r.shards[key]; s != nil {
		if s.idle != nil {
			s.idle.Stop()
			s.idle = nil
		}
		s.channels++
		if err := r.n.subscribe(context.WithoutCancel(ctx), s.sub, channel); err != nil {
			r.c.opts.Logger.V(1).Info("subscribe failed; the keeper subscribes again", "node", r.n.name, "error", err.Error())
		}
		return
	}
	keep, stop := context.WithCancel(context.WithoutCancel(ctx))
	s := &shardSub{sub: r.n.newSubscription(keep, channel), stop: stop, done: make(chan struct{}), channels: 1}
	r.shards[key] = s
	go func() {
		defer close(s.done)
		defer s.sub.Close() //nolint:errcheck // a second Close after remove's says only that it is closed
		keepSubscription(keep, r.c.opts.Clock, r.c.opts.Logger, s.sub, func(ctx context.Context) error { return r.resubscribe(ctx, key) }, r.deliver, func(m *redis.Subscription) { r.confirmed(keep, key, m) })
	}()
}

// detach drops channel from its shard's count and returns the shard when
// that was its last channel, for the caller to end. r.mu is held.
func (r *releaseWatches) detach(channel string) (last *shardSub) {
	key, ok := r.shardOf[channel]
	if !ok {
		return nil
	}
	delete(r.shardOf, channel)
	s := r.shards[key]
	if s.channels--; s.channels > 0 {
		return nil
	}
	delete(r.shards, key)
	return s
}

// shardKey is the key in r.shards of the subscription for channel: the
// address of the master that serves its slot on a Redis Cluster (""
// while the Cluster's layout is unknown), "" on any other node.
func (r *releaseWatches) shardKey(ctx context.Context, channel string) string {
	if r.n.cluster == nil {
		return ""
	}
	m, err := r.n.cluster.MasterForKey(ctx, channel)
	if err != nil {
		r.c.opts.Logger.V(1).Info("no master known for a lock's slot; subscribing by the Cluster's routing", "node", r.n.name, "channel", channel, "error", err.Error())
		return ""
	}
	return m.Options().Addr
}

// resubscribe subscribes the channels of the shard under key again, after
// the node refused a subscription. On a Redis Cluster it first reloads
// the layout and moves each channel whose slot another master serves now
// to that master's subscription, then subscribes the others one by one:
// SSUBSCRIBE refuses channels of several slots in one call.
func (r *releaseWatches) resubscribe(ctx context.Context, key string) error {
	if r.n.cluster != nil {
		r.n.cluster.ReloadState(ctx)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.shards[key]
	if s == nil {
		return nil
	}
	var stay []string
	for channel, k := range r.shardOf {
		if k != key {
			continue
		}
		if to := r.shardKey(ctx, channel); to != key && r.n.cluster != nil {
			if last := r.detach(channel); last != nil {
				last.stop() // its keeper, this goroutine, returns when this call does
			}
			r.attach(ctx, channel)
			continue
		}
		stay = append(stay, channel)
	}
	if len(stay) == 0 {
		return nil
	}
	if r.n.cluster == nil {
		return r.n.subscribe(ctx, s.sub, stay...)
	}
	for _, channel := range stay {
		if err := r.n.subscribe(ctx, s.sub, channel); err != nil {
			return err
		}
	}
	return nil
}

// deliver tells the watches of a lock of a message on its channel: a
// release wakes them all, a grant the WatchEvents ones.
func (r *releaseWatches) deliver(msg *redis.Message) {
	released := msg.Payload == eventReleased
	if !released && msg.Payload != eventAcquired {
		return
	}
	r.mu.Lock()
	ws := make([]*releaseWatch, 0, len(r.watches[msg.Channel]))
	for _, w := range r.watches[msg.Channel] {
		if !w.queued {
			ws = append(ws, w)
		}
	}
	if released {
		r.nextTurn(msg.Channel)
	}
	r.mu.Unlock()
	for _, w := range ws {
		w.notify(released)
	}
}

// nextTurn wakes the queued watch of channel whose turn it is and moves
// it to the end of the queue. r.mu is held.
func (r *releaseWatches) nextTurn(channel string) {
	q := r.turns[channel]
	if len(q) == 0 {
		return
	}
	w := q[0]
	copy(q, q[1:])
	q[len(q)-1] = w
	w.signal()
}

// passTurn wakes the next queued watch of channel, for a woken one that
// leaves without having acted on it.
func (r *releaseWatches) passTurn(channel string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nextTurn(channel)
}

// confirmed counts a node's confirmation of a SUBSCRIBE (the one a watch
// sent, or go-redis's own after a reconnection) and releases the watches
// that wait for their channel's. A shard channel the server unsubscribed
// by itself, its slot gone to another shard, is subscribed again there,
// and its watches are woken as by a release: one made during the
// migration was published in the importing master's shard.
func (r *releaseWatches) confirmed(ctx context.Context, key string, m *redis.Subscription) {
	switch m.Kind {
	case "subscribe", "ssubscribe":
	case "sunsubscribe":
		r.mu.Lock()
		moved := r.watches[m.Channel] != nil && r.shardOf[m.Channel] == key
		r.mu.Unlock()
		if moved {
			r.c.opts.Logger.V(1).Info("the server dropped a shard channel; subscribing where its slot lives now", "node", r.n.name, "channel", m.Channel)
			if err := r.resubscribe(ctx, key); err != nil {
				r.c.opts.Logger.V(1).Info("resubscribe failed; the keeper subscribes again", "node", r.n.name, "error", err.Error())
			}
			// A release made on the importing master before the move
			// was published in its shard, not here: wake the watches as
			// for one, so that none waits for a release it missed.
			r.deliver(&redis.Message{Channel: m.Channel, Payload: eventReleased})
		}
		return
	default:
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
	delete(r.outstanding, m.Channel)
}

// remove ends w's watch of channel: the last watch of a channel
// unsubscribes it, and the last channel of a shard leaves the shard's
// subscription open for subscriptionLinger (closes it at once on a Redis
// Cluster: see subscriptionLinger).
func (r *releaseWatches) remove(ctx context.Context, channel string, w *releaseWatch) {
	r.mu.Lock()
	ws := r.watches[channel]
	if i := slices.Index(ws, w); i >= 0 {
		ws = slices.Delete(ws, i, i+1)
		r.watches[channel] = ws
	}
	if w.queued {
		q := r.turns[channel]
		if i := slices.Index(q, w); i >= 0 {
			q = slices.Delete(q, i, i+1)
		}
		if len(q) == 0 {
			delete(r.turns, channel)
		} else {
			r.turns[channel] = q
		}
	}
	if len(ws) > 0 {
		r.mu.Unlock()
		return
	}
	delete(r.watches, channel)
	key := r.shardOf[channel]
	last := r.detach(channel)
	if last != nil && r.n.cluster == nil {
		// Kept open for subscriptionLinger, for the next watch. On
		// the real clock, not Options.Clock: how long a connection stays
		// open is no property of a lock, and a timer of ours left on a
		// test's fake clock once ObtainWait returned would read as a
		// sleeping waiter (FakeClock.HasWaiters).
		s := last
		r.shards[key] = s
		s.lingers++
		gen := s.lingers
		s.idle = clock.RealClock{}.AfterFunc(subscriptionLinger, func() { r.closeIdle(key, s, gen) })
		last = nil
	}
	if last == nil {
		if s := r.shards[key]; s != nil {
			if err := r.n.unsubscribe(ctx, s.sub, channel); err != nil {
				r.c.opts.Logger.V(1).Info("unsubscribe failed", "node", r.n.name, "error", err.Error())
			}
		}
		r.mu.Unlock()
		return
	}
	r.forgetConfirmations()
	r.mu.Unlock()
	last.close()
}

// close ends s's keeper and closes its subscription, and returns once the
// keeper has ended. Not with releaseWatches.mu held: the keeper takes it.
func (s *shardSub) close() {
	s.stop()
	_ = s.sub.Close()
	<-s.done
}

// forgetConfirmations drops the SUBSCRIBE confirmations still to come for
// channels nobody watches any more: their subscription is closing, and
// they have no one to release. r.mu is held.
func (r *releaseWatches) forgetConfirmations() {
	for ch := range r.outstanding {
		if r.watches[ch] == nil {
			delete(r.outstanding, ch)
			delete(r.confirming, ch)
		}
	}
}

// closeIdle closes s, the subscription under key, if its linger number gen
// ended with no channel subscribed on it again.
func (r *releaseWatches) closeIdle(key string, s *shardSub, gen int) {
	r.mu.Lock()
	if r.shards[key] != s || s.channels > 0 || s.lingers != gen {
		r.mu.Unlock()
		return
	}
	delete(r.shards, key)
	r.forgetConfirmations()
	r.mu.Unlock()
	s.close()
}
