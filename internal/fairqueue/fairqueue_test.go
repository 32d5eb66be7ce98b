package fairqueue_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"

	"github.com/redislock/redislock/internal/fairqueue"
)

// item is "<tenant>/<name>".
func tenantOf(item string) string { return item[:strings.IndexByte(item, '/')] }

// queue is a fair queue and its inner queue.
type queue struct {
	*fairqueue.Queue[string]
	inner priorityqueue.PriorityQueue[string]
}

func newQueue(t *testing.T, workers int) queue {
	t.Helper()
	inner := priorityqueue.New[string]("test")
	q := queue{fairqueue.New(inner, workers, tenantOf), inner}
	t.Cleanup(q.ShutDown)
	return q
}

func add(q queue, tenant string, n int) {
	for i := range n {
		q.Add(fmt.Sprintf("%s/%d", tenant, i))
	}
}

// get returns the next item, failing the test if none comes within a
// deadline far longer than a hand-out takes.
func get(t *testing.T, q queue) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		item, shutdown := q.Get()
		if shutdown {
			item = "shutdown"
		}
		got <- item
	}()
	select {
	case item := <-got:
		return item
	case <-time.After(30 * time.Second):
		t.Fatal("Get returned nothing in 30s")
		return ""
	}
}

// waitLen waits until the fair queue has taken n items from the inner
// queue, so that its turns see every tenant.
func waitLen(t *testing.T, q queue, n int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return q.inner.Len() == 0 && q.Len() >= n, nil
	})
	if err != nil {
		t.Fatalf("the queue holds %d items, not %d: %v", q.Len(), n, err)
	}
}

// A tenant alone with a backlog holds all workers but one, and a new
// tenant's single item takes the one left, ahead of the backlog.
func TestABacklogLeavesOneWorkerForAnotherTenant(t *testing.T) {
	q := newQueue(t, 4)
	add(q, "hostile", 1000)
	for range 3 {
		if item := get(t, q); tenantOf(item) != "hostile" {
			t.Fatalf("got %s; want a hostile item while it is alone", item)
		}
	}
	// The fourth Get waits: hostile holds 3 of 4 workers.
	fourth := make(chan string, 1)
	go func() { item, _ := q.Get(); fourth <- item }()
	q.Add("tenant-b/new")
	select {
	case item := <-fourth:
		if item != "tenant-b/new" {
			t.Fatalf("the fourth worker got %s; want tenant-b/new, ahead of 997 hostile items", item)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("tenant-b's item was not handed out")
	}
}

// With k tenants busy, each holds at most ceil(W/k) workers, and they are
// served in turn.
func TestTenantsWithWorkShareTheWorkersEqually(t *testing.T) {
	q := newQueue(t, 4)
	add(q, "a", 10)
	add(q, "b", 10)
	// Both backlogs in the queue, so that the share sees both.
	waitLen(t, q, 20)
	held := map[string]int{}
	var taken []string
	for range 4 {
		item := get(t, q)
		held[tenantOf(item)]++
		taken = append(taken, item)
	}
	if held["a"] != 2 || held["b"] != 2 {
		t.Fatalf("4 workers held %v (%v); want 2 each", held, taken)
	}
	// Done of an a frees a's share: the next item is a's.
	q.Done(taken[0])
	if item := get(t, q); tenantOf(item) != tenantOf(taken[0]) {
		t.Fatalf("after Done(%s) got %s; want the same tenant's next item", taken[0], item)
	}
}

// An item added again while a worker has it is handed out once more after
// Done, never twice at once.
func TestAnItemAddedWhileInFlightComesBackAfterDone(t *testing.T) {
	q := newQueue(t, 4)
	q.Add("a/x")
	if item := get(t, q); item != "a/x" {
		t.Fatalf("got %s", item)
	}
	q.Add("a/x")
	q.Add("a/y")
	if item := get(t, q); item != "a/y" {
		t.Fatalf("got %s while a/x is in flight; want a/y", item)
	}
	q.Done("a/x")
	if item := get(t, q); item != "a/x" {
		t.Fatalf("got %s after Done(a/x); want a/x again", item)
	}
}

// One worker serves every tenant in turn.
func TestOneWorkerServesTenantsInTurn(t *testing.T) {
	q := newQueue(t, 1)
	add(q, "a", 3)
	add(q, "b", 3)
	waitLen(t, q, 6)
	var order []string
	for range 6 {
		item := get(t, q)
		order = append(order, tenantOf(item))
		q.Done(item)
	}
	if got := strings.Join(order, ""); got != "ababab" {
		t.Fatalf("served %s; want ababab", got)
	}
}

// ShutDown wakes a waiting Get, which reports shutdown.
func TestShutDownWakesAWaitingGet(t *testing.T) {
	q := fairqueue.New(priorityqueue.New[string]("test"), 2, tenantOf)
	done := make(chan bool, 1)
	go func() { _, shutdown := q.Get(); done <- shutdown }()
	q.ShutDown()
	select {
	case shutdown := <-done:
		if !shutdown {
			t.Fatal("Get returned an item after ShutDown")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Get still waits 30s after ShutDown")
	}
}
