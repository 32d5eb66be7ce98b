package controller

import (
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/redislock/redislock/internal/fairqueue"
)

// reconcileTimeout bounds one reconcile: its few Redis calls, each within
// the lock's nodeTimeout (at most redislock.MaxNodeTimeout), and its API
// calls. It is a safety net: a worker is never held longer, whatever a
// server or the API server does.
const reconcileTimeout = time.Minute

// fairQueue returns the controller's queue constructor: controller-runtime's
// priority queue, handed out by fairqueue so that no namespace holds more
// than its share of the workers. A tenant whose servers never answer
// slows only her own locks; another namespace's lock gets a worker at
// once.
func fairQueue(log logr.Logger, workers int) func(string, workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	return func(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
		inner := priorityqueue.New(name, func(o *priorityqueue.Opts[reconcile.Request]) {
			o.Log = log.WithValues("controller", name)
			o.RateLimiter = rl
		})
		return fairqueue.New(inner, workers, func(r reconcile.Request) string { return r.Namespace })
	}
}
