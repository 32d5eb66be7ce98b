// Package fairqueue shares a controller's workers among tenants: a
// controller-runtime work queue that hands out items so that no tenant
// (for the RedisLock controller, a namespace) holds more than its share of
// the workers, whatever its items cost.
//
// What is guaranteed:
//  1. With W workers (W > 1), a tenant never has more than W-1 items being
//     processed at once: one worker is always left for the others. When k
//     tenants have work, each may hold at most ceil(W/k) workers (at least
//     one), so a tenant with a single item gets a worker as soon as one is
//     free of a tenant over its share, not after that tenant's backlog.
//  2. Tenants whose items wait are served in turn (round robin); a
//     tenant's own items in the order the inner queue handed them out.
//  3. Everything else is the inner queue's: de-duplication (an item is
//     never handed out twice at once, and an item added while it waits or
//     is processed is handed out again after Done), delays, rate limits
//     and priorities between the items of one tenant.
//
// What is not: an item being processed is never interrupted; how long a
// worker is held is bounded by the reconcile's own deadline.
package fairqueue

import (
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
)

// Queue is a priorityqueue.PriorityQueue whose Get and GetWithPriority
// share the workers among tenants (see the package doc). Build it with New.
type Queue[T comparable] struct {
	// The inner queue serves everything but Get, GetWithPriority, Done,
	// Len and ShutDown.
	priorityqueue.PriorityQueue[T]

	tenant  func(T) string
	workers int

	mu   sync.Mutex
	cond *sync.Cond
	// waiting holds the items taken from the inner queue that no worker
	// has yet, per tenant; ring lists the tenants with waiting items, in
	// turn, next the index of the one served next.
	waiting  map[string][]entry[T]
	ring     []string
	next     int
	inflight map[string]int
	stopped  bool
}

type entry[T comparable] struct {
	item     T
	priority int
}

// New returns a Queue over inner for a controller with workers workers;
// tenant names the tenant of an item. It takes items from inner as they
// become ready, on one goroutine that ends when inner shuts down.
func New[T comparable](inner priorityqueue.PriorityQueue[T], workers int, tenant func(T) string) *Queue[T] {
	q := &Queue[T]{PriorityQueue: inner, tenant: tenant, workers: max(1, workers), waiting: map[string][]entry[T]{}, inflight: map[string]int{}}
	q.cond = sync.NewCond(&q.mu)
	go q.pump()
	return q
}

// pump moves each item the inner queue hands out to its tenant's line.
// The inner queue counts it as being processed from then on, so adding it
// again only marks it for another turn after Done.
func (q *Queue[T]) pump() {
	for {
		item, priority, shutdown := q.PriorityQueue.GetWithPriority()
		q.mu.Lock()
		if shutdown {
			q.stopped = true
			q.cond.Broadcast()
			q.mu.Unlock()
			return
		}
		t := q.tenant(item)
		if len(q.waiting[t]) == 0 {
			q.ring = append(q.ring, t)
		}
		q.waiting[t] = append(q.waiting[t], entry[T]{item, priority})
		q.cond.Broadcast()
		q.mu.Unlock()
	}
}

// GetWithPriority blocks until an item of a tenant under its share waits,
// and returns it; shutdown is true once the queue shuts down.
func (q *Queue[T]) GetWithPriority() (item T, priority int, shutdown bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		if q.stopped {
			var zero T
			return zero, 0, true
		}
		if e, ok := q.pick(); ok {
			return e.item, e.priority, false
		}
		q.cond.Wait()
	}
}

// Get is GetWithPriority without the priority.
func (q *Queue[T]) Get() (item T, shutdown bool) {
	item, _, shutdown = q.GetWithPriority()
	return item, shutdown
}

// pick takes the next waiting item, in turn, of a tenant under its share,
// and counts it in flight. q.mu is held.
func (q *Queue[T]) pick() (entry[T], bool) {
	active := len(q.ring)
	for t := range q.inflight {
		if len(q.waiting[t]) == 0 {
			active++
		}
	}
	limit := q.share(active)
	for i := range q.ring {
		at := (q.next + i) % len(q.ring)
		t := q.ring[at]
		if q.inflight[t] >= limit {
			continue
		}
		e := q.waiting[t][0]
		if rest := q.waiting[t][1:]; len(rest) > 0 {
			q.waiting[t] = rest
			q.next = at + 1
		} else {
			delete(q.waiting, t)
			q.ring = append(q.ring[:at], q.ring[at+1:]...)
			q.next = at
		}
		if len(q.ring) > 0 {
			q.next %= len(q.ring)
		} else {
			q.next = 0
		}
		q.inflight[t]++
		return e, true
	}
	var none entry[T]
	return none, false
}

// share is how many workers each tenant may hold when active tenants have
// work: an equal share, rounded up, at least one, and never all W.
func (q *Queue[T]) share(active int) int {
	if q.workers == 1 {
		return 1
	}
	return max(1, min(q.workers-1, (q.workers+active-1)/max(1, active)))
}

// Done marks item processed: its tenant's share frees, and the inner
// queue may hand it out again if it was added meanwhile.
func (q *Queue[T]) Done(item T) {
	t := q.tenant(item)
	q.mu.Lock()
	if q.inflight[t]--; q.inflight[t] <= 0 {
		delete(q.inflight, t)
	}
	q.cond.Broadcast()
	q.mu.Unlock()
	q.PriorityQueue.Done(item)
}

// Len is the number of items ready for a worker: those the inner queue
// holds ready, and those waiting for their tenant's turn.
func (q *Queue[T]) Len() int {
	q.mu.Lock()
	n := 0
	for _, w := range q.waiting {
		n += len(w)
	}
	q.mu.Unlock()
	return n + q.PriorityQueue.Len()
}

// ShutDown shuts the inner queue down and wakes every Get, which returns
// shutdown.
func (q *Queue[T]) ShutDown() {
	q.PriorityQueue.ShutDown()
	q.mu.Lock()
	q.stopped = true
	q.cond.Broadcast()
	q.mu.Unlock()
}

// ShutDownWithDrain is ShutDown: controller-runtime does not drain.
func (q *Queue[T]) ShutDownWithDrain() { q.ShutDown() }
