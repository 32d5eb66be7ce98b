package controller

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/pkg/redisconn"
	"github.com/redislock/redislock/pkg/redislock"
)

// errStopping is what a dial that finishes after closeAll returns: its
// clients are closed at once, not kept past the controller's end.
var errStopping = errors.New("controller: stopping")

// clientCache shares Redis clients among the RedisLocks with the same
// connection config, listens to their locks' pub/sub messages, and closes
// the clients when the last RedisLock using them stops.
type clientCache struct {
	log     logr.Logger
	clock   clock.WithDelayedExecution
	changed chan<- event.GenericEvent

	mu      sync.Mutex
	closed  bool                         // closeAll ran: the controller stops
	entries map[string]*cacheEntry       // by redisconn.Config.Key
	users   map[types.NamespacedName]use // which entry each RedisLock uses
}

type use struct {
	key, lock string
}

type cacheEntry struct {
	lc *redislock.Client
	// eviction is the last CheckEviction's outcome, and evictionAt when
	// it ran; both under the cache's mutex.
	eviction   error
	evictionAt time.Time
	nodes      []redis.UniversalClient
	done       chan struct{}                            // closed when the entry closes
	byLock     map[string]map[types.NamespacedName]bool // lock name -> RedisLocks
	// watches are the lock-event subscriptions, one per lock name in
	// byLock; under the cache's mutex.
	watches map[string]*lockWatch
}

// lockWatch is the subscription to one lock's events; stop is nil while
// it is being set up.
type lockWatch struct{ stop func() }

func newClientCache(log logr.Logger, clk clock.WithDelayedExecution, changed chan<- event.GenericEvent) *clientCache {
	return &clientCache{log: log, clock: clk, changed: changed, entries: map[string]*cacheEntry{}, users: map[types.NamespacedName]use{}}
}

// get returns the lock client for cfg and records that nn watches lock.
// It dials without c.mu held, so that a Redis slow to answer holds up
// only the RedisLocks that use it; when two dial the same config at once,
// the first to finish is kept and the other's clients are closed.
func (c *clientCache) get(ctx context.Context, nn types.NamespacedName, cfg redisconn.Config, lock string) (*redislock.Client, error) {
	key := cfg.Key()
	c.mu.Lock()
	if u, ok := c.users[nn]; ok && u != (use{key, lock}) {
		cleanup := c.detach(nn, u) // under c.mu, as detach needs
		go cleanup()
	}
	e := c.entries[key]
	c.mu.Unlock()
	if e == nil {
		opened, err := c.open(ctx, cfg)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			c.close(opened)
			return nil, errStopping
		}
		if e = c.entries[key]; e == nil {
			e = opened
			c.entries[key] = e
		} else {
			defer c.close(opened)
		}
	} else {
		c.mu.Lock()
		if c.entries[key] != e {
			// Closed meanwhile, its last user gone: dial anew.
			c.mu.Unlock()
			return c.get(ctx, nn, cfg, lock)
		}
	}
	if e.byLock[lock] == nil {
		e.byLock[lock] = map[types.NamespacedName]bool{}
	}
	e.byLock[lock][nn] = true
	c.users[nn] = use{key, lock}
	w, watched := e.watches[lock]
	if !watched {
		w = &lockWatch{}
		e.watches[lock] = w
	}
	c.mu.Unlock()
	if !watched {
		c.watch(ctx, e, lock, w)
	}
	return e.lc, nil
}

// watch subscribes w to the events of lock on e's nodes, so that each
// grant and release enqueues the RedisLocks of that lock. The subscription
// is confirmed before the caller reads the lock, so no change after the
// read goes unheard. A watch dropped meanwhile (its last RedisLock gone,
// or the entry closed) is stopped again.
func (c *clientCache) watch(ctx context.Context, e *cacheEntry, lock string, w *lockWatch) {
	stop := e.lc.WatchEvents(ctx, lock, func() { c.notify(e, lock) })
	c.mu.Lock()
	keep := e.watches[lock] == w
	if keep {
		w.stop = stop
	}
	c.mu.Unlock()
	if !keep {
		stop()
	}
}

// evictionRisk returns the outcome of the nodes' eviction check for nn's
// entry, checking again when the last check is older than every.
func (c *clientCache) evictionRisk(ctx context.Context, nn types.NamespacedName, every time.Duration) error {
	c.mu.Lock()
	u, ok := c.users[nn]
	e := c.entries[u.key]
	if !ok || e == nil {
		c.mu.Unlock()
		return nil
	}
	if c.clock.Since(e.evictionAt) < every {
		defer c.mu.Unlock()
		return e.eviction
	}
	c.mu.Unlock()
	err := e.lc.CheckEviction(ctx)
	c.mu.Lock()
	e.eviction, e.evictionAt = err, c.clock.Now()
	c.mu.Unlock()
	return err
}

// forget records that nn no longer watches anything.
func (c *clientCache) forget(nn types.NamespacedName) {
	c.mu.Lock()
	cleanup := func() {}
	if u, ok := c.users[nn]; ok {
		cleanup = c.detach(nn, u)
	}
	c.mu.Unlock()
	cleanup()
}

// detach removes nn from its entry, and returns what the caller must do
// without c.mu held: stop the lock's subscription when nn was its last
// RedisLock, and close the entry when nothing uses it any more. c.mu is
// held.
func (c *clientCache) detach(nn types.NamespacedName, u use) (cleanup func()) {
	delete(c.users, nn)
	e := c.entries[u.key]
	if e == nil {
		return func() {}
	}
	delete(e.byLock[u.lock], nn)
	var stop func()
	if len(e.byLock[u.lock]) == 0 {
		delete(e.byLock, u.lock)
		if w := e.watches[u.lock]; w != nil {
			stop = w.stop // nil while watch sets it up; watch stops it then
		}
		delete(e.watches, u.lock)
	}
	unused := len(e.byLock) == 0
	if unused {
		delete(c.entries, u.key)
	}
	return func() {
		if stop != nil {
			stop()
		}
		if unused {
			c.close(e)
		}
	}
}

// closeAll closes every entry, when the controller stops.
func (c *clientCache) closeAll() {
	c.mu.Lock()
	entries := c.entries
	c.entries, c.users, c.closed = map[string]*cacheEntry{}, map[types.NamespacedName]use{}, true
	c.mu.Unlock()
	for _, e := range entries {
		c.close(e)
	}
}

// open dials the clients of cfg and checks that Redlock nodes are
// distinct servers.
func (c *clientCache) open(ctx context.Context, cfg redisconn.Config) (*cacheEntry, error) {
	nodes := cfg.Clients()
	// A force-release waits for the replicas as the candidates' writes
	// do, so that a failover right after it cannot undo it.
	lc, err := redislock.New(nodes, &redislock.Options{Identity: "redislock-controller", NodeTimeout: cfg.NodeTimeout, WaitReplicas: cfg.WaitReplicas, Logger: c.log, Clock: c.clock})
	if err == nil {
		err = lc.CheckIndependent(ctx)
	}
	if err != nil {
		for _, n := range nodes {
			_ = n.Close()
		}
		return nil, err
	}
	return &cacheEntry{lc: lc, nodes: nodes, done: make(chan struct{}), byLock: map[string]map[types.NamespacedName]bool{}, watches: map[string]*lockWatch{}}, nil
}

// notify enqueues the RedisLocks that watch lock.
func (c *clientCache) notify(e *cacheEntry, lock string) {
	c.mu.Lock()
	var targets []types.NamespacedName
	for nn := range e.byLock[lock] {
		targets = append(targets, nn)
	}
	c.mu.Unlock()
	for _, nn := range targets {
		ev := event.GenericEvent{Object: &v1alpha1.RedisLock{ObjectMeta: metav1.ObjectMeta{Namespace: nn.Namespace, Name: nn.Name}}}
		select {
		case c.changed <- ev:
		case <-e.done:
			return
		}
	}
}

// close ends e's subscriptions and closes its clients, once nothing uses
// it.
func (c *clientCache) close(e *cacheEntry) {
	close(e.done)
	c.mu.Lock()
	var stops []func()
	for _, w := range e.watches {
		if w.stop != nil {
			stops = append(stops, w.stop)
		}
	}
	e.watches = map[string]*lockWatch{}
	c.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
	for _, n := range e.nodes {
		_ = n.Close()
	}
}
