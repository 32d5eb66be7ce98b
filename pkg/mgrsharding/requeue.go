package mgrsharding

import (
	"context"
	"fmt"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// requeue is a started Requeue source.
type requeue struct {
	// pending are the shards gained and not yet listed; kick says there
	// are some. Under Sharding.mu.
	pending map[int]bool
	kick    chan struct{}
}

// gained notes that shard index was gained, with Sharding.mu held.
func (r *requeue) gained(index int) {
	r.pending[index] = true
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// listBackoff spaces the tries of a List that fails.
var listBackoff = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Cap: 10 * time.Second, Steps: math.MaxInt32}

// Requeue returns a source that, each time this replica gains shards (and
// once at its start, for the shards already held), lists the objects of
// list's type from reader (the manager's cache: no API request), with
// opts (a label selector, say: the objects the controller's predicates
// let through), and enqueues those of the gained shards, so that a
// shard's objects are reconciled by their new holder with no change to
// them. Gains that come while a List runs are listed together next. A
// List that fails is tried again, from 100ms doubling to 10s, and logged
// (controller-runtime's logger of the context, else its global one).
func (s *Sharding) Requeue(reader client.Reader, list client.ObjectList, opts ...client.ListOption) source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		r := &requeue{pending: map[int]bool{}, kick: make(chan struct{}, 1)}
		s.mu.Lock()
		s.requeues[r] = struct{}{}
		for i := range s.terms {
			r.gained(i)
		}
		s.mu.Unlock()
		go func() {
			defer func() {
				s.mu.Lock()
				delete(s.requeues, r)
				s.mu.Unlock()
			}()
			for {
				select {
				case <-ctx.Done():
					return
				case <-r.kick:
				}
				s.mu.Lock()
				shards := r.pending
				r.pending = map[int]bool{}
				s.mu.Unlock()
				err := wait.ExponentialBackoffWithContext(ctx, listBackoff, func(ctx context.Context) (bool, error) {
					if err := s.enqueue(ctx, reader, list, opts, shards, q); err != nil {
						logf.FromContext(ctx).Error(err, "cannot requeue the objects of gained shards", "lock", s.name)
						return false, nil
					}
					return true, nil
				})
				if err != nil {
					return // ctx ended
				}
			}
		}()
		return nil
	})
}

// enqueue lists list's type from reader with opts and adds the objects of shards to q.
func (s *Sharding) enqueue(ctx context.Context, reader client.Reader, list client.ObjectList, opts []client.ListOption, shards map[int]bool, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	l, ok := list.DeepCopyObject().(client.ObjectList)
	if !ok {
		return fmt.Errorf("mgrsharding: %T is not a client.ObjectList", list)
	}
	if err := reader.List(ctx, l, opts...); err != nil {
		return fmt.Errorf("mgrsharding: list %T: %w", list, err)
	}
	return meta.EachListItem(l, func(o runtime.Object) error {
		m, err := meta.Accessor(o)
		if err != nil {
			return fmt.Errorf("mgrsharding: %T: %w", o, err)
		}
		if shards[ShardOf(m.GetNamespace(), m.GetName(), s.shards)] {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()}})
		}
		return nil
	})
}
