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
	stop       func()                                   // ends the lock-event subscriptions
	byLock     map[string]map[types.NamespacedName]bool // lock name -> RedisLocks
}

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
		if old := c.detach(nn, u); old != nil {
			go old.close()
		}
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
			opened.close()
			return nil, errStopping
		}
		if e = c.entries[key]; e == nil {
			e = opened
			c.entries[key] = e
		} else {
			defer opened.close()
		}
	} else {
		c.mu.Lock()
		if c.entries[key] != e {
			// Closed meanwhile, its last user gone: dial anew.
			c.mu.Unlock()
			return c.get(ctx, nn, cfg, lock)
		}
	}
	defer c.mu.Unlock()
	if e.byLock[lock] == nil {
		e.byLock[lock] = map[types.NamespacedName]bool{}
	}
	e.byLock[lock][nn] = true
	c.users[nn] = use{key, lock}
	return e.lc, nil
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
	var unused *cacheEntry
	if u, ok := c.users[nn]; ok {
		unused = c.detach(nn, u)
	}
	c.mu.Unlock()
	if unused != nil {
		unused.close()
	}
}

// detach removes nn from its entry and returns the entry if nothing uses
// it any more, for the caller to close without c.mu held. c.mu is held.
func (c *clientCache) detach(nn types.NamespacedName, u use) *cacheEntry {
	delete(c.users, nn)
	e := c.entries[u.key]
	if e == nil {
		return nil
	}
	delete(e.byLock[u.lock], nn)
	if len(e.byLock[u.lock]) == 0 {
		delete(e.byLock, u.lock)
	}
	if len(e.byLock) > 0 {
		return nil
	}
	delete(c.entries, u.key)
	return e
}

// closeAll closes every entry, when the controller stops.
func (c *clientCache) closeAll() {
	c.mu.Lock()
	entries := c.entries
	c.entries, c.users, c.closed = map[string]*cacheEntry{}, map[types.NamespacedName]use{}, true
	c.mu.Unlock()
	for _, e := range entries {
		e.close()
	}
}

// open dials the clients of cfg, checks that Redlock nodes are distinct
// servers, and listens for lock events on each node.
func (c *clientCache) open(ctx context.Context, cfg redisconn.Config) (*cacheEntry, error) {
	nodes := cfg.Clients()
	lc, err := redislock.New(nodes, &redislock.Options{Identity: "redislock-controller", NodeTimeout: cfg.NodeTimeout, Logger: c.log, Clock: c.clock})
	if err == nil {
		err = lc.CheckIndependent(ctx)
	}
	if err != nil {
		for _, n := range nodes {
			_ = n.Close()
		}
		return nil, err
	}
	e := &cacheEntry{lc: lc, nodes: nodes, done: make(chan struct{}), byLock: map[string]map[types.NamespacedName]bool{}}
	// The engine resubscribes after faults, and after a resubscription
	// the server refused.
	e.stop = lc.WatchEvents(context.WithoutCancel(ctx), func(lock string) { c.notify(e, lock) })
	return e, nil
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

func (e *cacheEntry) close() {
	close(e.done)
	e.stop()
	for _, n := range e.nodes {
		_ = n.Close()
	}
}
