package mgrsharding

import (
	"context"

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
