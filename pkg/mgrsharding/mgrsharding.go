// Package mgrsharding spreads a controller-runtime operator's objects over
// its replicas by the shards of a sharded RedisLock (spec.shards): every
// replica runs the manager, an object belongs to shard ShardOf(namespace,
// name), and a replica reconciles only the objects of the shards it holds.
//
// Wire it in four places:
//
//   - mgr.Add(sharding): the candidate, which runs on every replica
//     (it needs no leader election);
//   - the manager's config from sharding.Gate(cfg): a reconcile's writes
//     are refused once its shard is no longer held;
//   - Complete(sharding.Reconciler(r)): requests of shards held elsewhere
//     are dropped, and each reconcile's context carries its shard
//     (FromContext) and ends when the shard moves or lapses;
//   - WatchesRawSource(sharding.Requeue(mgr.GetCache(), &FooList{})): a
//     shard's objects are reconciled again when this replica gains it.
//
// A shard moves only after the reconciles of its old holder have returned
// (redislock.ShardedOptions.OnStopped waits for them), so no object is
// reconciled by two replicas at overlapping times while the candidates
// hand over; after a crash the shard moves when its ttl has run out, and
// the old holder's writes stopped at its renewDeadline (the gate).
// Controllers that must keep one leader stay in the same manager, on its
// leader election (mgrelection); the sharded ones set
// NeedLeaderElection false.
package mgrsharding

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/redislock/redislock/pkg/redisconn"
	"github.com/redislock/redislock/pkg/redislock"
)

// Sharding is one replica's candidacy for the shards of a sharded lock,
// and what a manager needs to reconcile only the objects of the shards it
// holds. It is a manager.Runnable that needs no leader election.
type Sharding struct {
	sharded *redislock.Sharded
	name    string
	shards  int
	close   func()

	mu    sync.Mutex
	terms map[int]*term
	// requeues are the started Requeue sources, told of each gain.
	requeues map[*requeue]struct{}
}

// term is one grant of a shard to this replica, as the reconciles see it.
type term struct {
	shard redislock.Shard
	ctx   context.Context
	// inflight counts the reconciles running under this term; once
	// stopping, none starts, and idle is closed when the last returns.
	// Under Sharding.mu.
	inflight int
	stopping bool
	idle     chan struct{}
}

// ForRedisLock reads the sharded RedisLock ref (spec.shards set), the
// connection it names and their Secrets through cfg, with the rights
// mgrelection.ForRedisLock lists, and returns this replica's Sharding for
// identity ("" means the POD_NAME environment variable, else the
// hostname). Close it after the manager stops. Its errors wrap
// redisconn.ErrSecret, redisconn.ErrInvalidSpec (a rule the API server
// cannot check, or no spec.shards), redisconn.ErrConnection, a redislock
// sentinel or an API error, for errors.Is.
func ForRedisLock(ctx context.Context, cfg *rest.Config, ref types.NamespacedName, identity string) (*Sharding, error) {
	c, err := redisconn.NewAPIClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("mgrsharding: %w", err)
	}
	cand, err := redisconn.OpenCandidate(ctx, c, ref, "", redislock.Options{Identity: identity})
	if err != nil {
		return nil, fmt.Errorf("mgrsharding: %w", err)
	}
	if cand.Object.Spec.Shards == nil {
		cand.Close()
		return nil, fmt.Errorf("mgrsharding: %w: RedisLock %s has no spec.shards", redisconn.ErrInvalidSpec, ref)
	}
	s, err := New(cand.Client, cand.Name, int(*cand.Object.Spec.Shards), cand.Timing)
	if err != nil {
		cand.Close()
		return nil, fmt.Errorf("mgrsharding: RedisLock %s: %w", ref, err)
	}
	s.close = cand.Close
	return s, nil
}

// New returns a Sharding for the sharded lock name of c, split into
// shards with timing t: what ForRedisLock builds, for a lock not declared
// by a RedisLock. Invalid options give redislock.NewSharded's error.
func New(c *redislock.Client, name string, shards int, t redislock.Timing) (*Sharding, error) {
	s := &Sharding{name: name, shards: shards, terms: map[int]*term{}, requeues: map[*requeue]struct{}{}}
	var err error
	s.sharded, err = c.NewSharded(redislock.ShardedOptions{
		Name: name, Shards: shards, Timing: t,
		OnStarted: s.started, OnStopped: s.stopped,
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Start campaigns for shards until ctx ends, then waits for the reconciles
// of the shards held to return and gives the shards back.
func (s *Sharding) Start(ctx context.Context) error {
	return s.sharded.Run(ctx)
}

// NeedLeaderElection is false: every replica campaigns for shards.
func (s *Sharding) NeedLeaderElection() bool { return false }

// State is what the candidate knows now (redislock.Sharded.State).
func (s *Sharding) State() redislock.ShardedState { return s.sharded.State() }

// Close closes the Redis clients ForRedisLock opened; a Sharding from New
// has none.
func (s *Sharding) Close() {
	if s.close != nil {
		s.close()
	}
}

// started records a shard just granted and tells the Requeue sources.
func (s *Sharding) started(ctx context.Context, sh redislock.Shard) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ctx.Err() != nil {
		// Ended before it was recorded: stopped, which runs next, finds none.
		return
	}
	s.terms[sh.Index] = &term{shard: sh, ctx: ctx, idle: make(chan struct{})}
	for r := range s.requeues {
		r.gained(sh.Index)
	}
}

// stopped lets no reconcile of the shard start and waits for those
// running to return: only then may the shard move.
func (s *Sharding) stopped(sh redislock.Shard) {
	s.mu.Lock()
	t := s.terms[sh.Index]
	if t == nil || t.shard != sh {
		s.mu.Unlock()
		return
	}
	t.stopping = true
	if t.inflight == 0 {
		close(t.idle)
	}
	s.mu.Unlock()
	<-t.idle
	s.mu.Lock()
	delete(s.terms, sh.Index)
	s.mu.Unlock()
}

// enter starts a reconcile under the shard's term, or returns nil if the
// shard is not held.
func (s *Sharding) enter(index int) *term {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.terms[index]
	if t == nil || t.stopping || t.ctx.Err() != nil {
		return nil
	}
	t.inflight++
	return t
}

// exit ends a reconcile that enter started.
func (s *Sharding) exit(t *term) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t.inflight--
	if t.stopping && t.inflight == 0 {
		close(t.idle)
	}
}
