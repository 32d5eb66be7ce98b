package mgrsharding

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/redislock/redislock/pkg/redislock"
)

// claimKey is the context key of a reconcile's claim.
type claimKey struct{}

// claim is the shard a reconcile runs under.
type claim struct {
	s     *Sharding
	shard redislock.Shard
}

// ErrNotHeld is Valid's error for a reconcile whose shard is no longer
// held.
var ErrNotHeld = errors.New("mgrsharding: the reconcile's shard is no longer held")

// Valid returns nil if the shard that the reconcile of ctx runs under is
// held by this replica at this instant, with the same fencing token, by
// the candidate's clock (redislock.Sharded.State): what the write gate
// checks. Check it before a side effect the gate does not see (a call to
// another system), and before reporting work done. Otherwise it returns
// an error wrapping ErrNotHeld, or one saying ctx is no reconcile's.
func Valid(ctx context.Context) error {
	c, ok := ctx.Value(claimKey{}).(claim)
	if !ok {
		return fmt.Errorf("%w: the context is no sharded reconcile's", ErrNotHeld)
	}
	if slices.ContainsFunc(c.s.sharded.State().Held, func(h redislock.HeldShard) bool { return h.Shard == c.shard }) {
		return nil
	}
	return fmt.Errorf("%w: shard %d, token %d", ErrNotHeld, c.shard.Index, c.shard.Fence)
}

// FromContext returns the shard, with its fencing token, that the
// reconcile whose context ctx is (or derives from) runs under.
func FromContext(ctx context.Context) (redislock.Shard, bool) {
	c, ok := ctx.Value(claimKey{}).(claim)
	return c.shard, ok
}

// Reconciler wraps r so that it reconciles only the objects of the shards
// this replica holds: a request whose object's shard (ShardOf) is held
// elsewhere, or is being handed over, is dropped with no error and no
// requeue (its holder reconciles it, and Requeue brings it back here if
// the shard comes). A reconcile that runs has a context that carries its
// shard (FromContext) and ends when the shard is to move or its validity
// lapses; the shard moves only once the reconcile has returned.
func (s *Sharding) Reconciler(r reconcile.Reconciler) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		t := s.enter(ShardOf(req.Namespace, req.Name, s.shards))
		if t == nil {
			return reconcile.Result{}, nil
		}
		defer s.exit(t)
		ctx, cancel := context.WithCancelCause(context.WithValue(ctx, claimKey{}, claim{s, t.shard}))
		defer cancel(nil)
		stop := context.AfterFunc(t.ctx, func() { cancel(context.Cause(t.ctx)) })
		defer stop()
		return r.Reconcile(ctx, req)
	})
}
