package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/redislock/redislock/pkg/redislock"
)

// exampleAddr is a redis-server started by TestMain.
var exampleAddr string

func Example() {
	rc := redis.NewClient(&redis.Options{Addr: exampleAddr, ContextTimeoutEnabled: true})
	defer func() { _ = rc.Close() }()
	// This Redis persists every write before answering (appendonly yes,
	// appendfsync always), so a node with no record of a lock has never
	// granted it; without that, leave AssumeDurable false.
	locks, err := redislock.New([]redis.UniversalClient{rc}, &redislock.Options{Identity: "worker-1", AssumeDurable: true})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()

	lock, err := locks.Obtain(ctx, "nightly-report", 30*time.Second)
	if errors.Is(err, redislock.ErrNotObtained) {
		fmt.Println("someone else is writing the report")
		return
	}
	if err != nil {
		panic(err)
	}
	defer func() { _ = lock.Release(ctx) }()

	// Pass the fencing token to the storage the report goes to, so that a
	// stale writer can be refused there.
	// (The first token of a lock is the Redis server's clock in
	// milliseconds times 1000; each later holder's is larger.)
	fmt.Println("holding the lock; fencing token > 0:", lock.Fence() > 0, "valid:", lock.Valid())
	// Output: holding the lock; fencing token > 0: true valid: true
}

func ExampleLock_Watchdog() {
	rc := redis.NewClient(&redis.Options{Addr: exampleAddr, ContextTimeoutEnabled: true})
	defer func() { _ = rc.Close() }()
	locks, err := redislock.New([]redis.UniversalClient{rc}, &redislock.Options{Identity: "worker-1", AssumeDurable: true})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	lock, err := locks.Obtain(ctx, "long-job", 3*time.Second)
	if err != nil {
		panic(err)
	}
	// Renew every second; give up if no renewal succeeded for 2s.
	held, stop, err := lock.Watchdog(ctx, time.Second, 2*time.Second)
	if err != nil {
		panic(err)
	}
	// Long work runs under held: it is cancelled if the lock is lost.
	fmt.Println("working:", held.Err() == nil)
	fmt.Println("stopped cleanly:", stop() == nil)
	fmt.Println("released:", lock.Release(ctx) == nil)
	// Output:
	// working: true
	// stopped cleanly: true
	// released: true
}

func ExampleClient_NewElector() {
	rc := redis.NewClient(&redis.Options{Addr: exampleAddr, ContextTimeoutEnabled: true})
	defer func() { _ = rc.Close() }()
	locks, err := redislock.New([]redis.UniversalClient{rc}, &redislock.Options{Identity: "pod-0", AssumeDurable: true})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	elector, err := locks.NewElector(redislock.ElectorOptions{
		Name: "my-operator",
		OnStartedLeading: func(leading context.Context, l *redislock.Lock) {
			fmt.Println("leading; fencing token > 0:", l.Fence() > 0)
			cancel() // a real leader works until leading is cancelled
		},
		OnStoppedLeading: func() { fmt.Println("stopped leading") },
	})
	if err != nil {
		panic(err)
	}
	if err := elector.Run(ctx); err != nil {
		panic(err)
	}
	// Output:
	// leading; fencing token > 0: true
	// stopped leading
}

func ExampleClient_ObtainWait() {
	rc := redis.NewClient(&redis.Options{Addr: exampleAddr, ContextTimeoutEnabled: true})
	defer func() { _ = rc.Close() }()
	locks, err := redislock.New([]redis.UniversalClient{rc}, &redislock.Options{Identity: "worker-1", AssumeDurable: true})
	if err != nil {
		panic(err)
	}
	other, err := redislock.New([]redis.UniversalClient{rc}, &redislock.Options{Identity: "worker-2", AssumeDurable: true})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	first, err := other.Obtain(ctx, "invoice-42", time.Minute)
	if err != nil {
		panic(err)
	}
	go func() {
		// worker-2 finishes: its release wakes the waiter at once.
		_ = first.Release(ctx)
	}()

	// Wait up to 10s: woken by the release, not by polling.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	lock, err := locks.ObtainWait(wctx, "invoice-42", time.Minute, &redislock.ObtainOptions{
		Metadata: "10.0.0.7:8080",
		// At most 5 attempts; after a Redis fault, retry after 100ms, then 200ms, ...
		Retry: &wait.Backoff{Steps: 5, Duration: 100 * time.Millisecond, Factor: 2},
	})
	if errors.Is(err, context.DeadlineExceeded) {
		fmt.Println("still held after 10s:", err)
		return
	}
	if err != nil {
		panic(err)
	}
	defer func() { _ = lock.Release(ctx) }()
	h, err := other.Inspect(ctx, "invoice-42")
	if err != nil {
		panic(err)
	}
	fmt.Println("holder:", h.Identity, "metadata:", h.Metadata, "fence above the first:", lock.Fence() > first.Fence())
	// Output: holder: worker-1 metadata: 10.0.0.7:8080 fence above the first: true
}

func ExampleOptions_keyPrefix() {
	rc := redis.NewClient(&redis.Options{Addr: exampleAddr, ContextTimeoutEnabled: true})
	defer func() { _ = rc.Close() }()
	// Two applications on one Redis: each names its keys under its own
	// prefix, so "reports" of one is not "reports" of the other.
	billing, err := redislock.New([]redis.UniversalClient{rc}, &redislock.Options{KeyPrefix: "billing:", AssumeDurable: true})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	lock, err := billing.Obtain(ctx, "reports", time.Minute)
	if err != nil {
		panic(err)
	}
	defer func() { _ = lock.Release(ctx) }()
	n, err := rc.Exists(ctx, "billing:{reports}").Result()
	if err != nil {
		panic(err)
	}
	fmt.Println("billing:{reports} exists:", n == 1)
	// Output: billing:{reports} exists: true
}

func ExampleLock_TTL() {
	rc := redis.NewClient(&redis.Options{Addr: exampleAddr, ContextTimeoutEnabled: true})
	defer func() { _ = rc.Close() }()
	locks, err := redislock.New([]redis.UniversalClient{rc}, &redislock.Options{AssumeDurable: true})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	lock, err := locks.Obtain(ctx, "ttl-example", time.Minute)
	if err != nil {
		panic(err)
	}
	defer func() { _ = lock.Release(ctx) }()
	left, err := lock.TTL(ctx) // what Redis holds, on a majority of nodes
	if err != nil {
		panic(err)
	}
	fmt.Println("more than 50s left:", left > 50*time.Second)
	// Output: more than 50s left: true
}

func ExampleLock_RefreshTTL() {
	rc := redis.NewClient(&redis.Options{Addr: exampleAddr, ContextTimeoutEnabled: true})
	defer func() { _ = rc.Close() }()
	locks, err := redislock.New([]redis.UniversalClient{rc}, &redislock.Options{AssumeDurable: true})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	lock, err := locks.Obtain(ctx, "migration", 10*time.Second)
	if err != nil {
		panic(err)
	}
	defer func() { _ = lock.Release(ctx) }()
	// The work turns out long: hold it for 10 minutes from now, and
	// renew with that from then on.
	if err := lock.RefreshTTL(ctx, 10*time.Minute); err != nil {
		panic(err)
	}
	left, err := lock.TTL(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("more than 9 minutes left:", left > 9*time.Minute)
	// Output: more than 9 minutes left: true
}

func ExampleClient_NewSharded() {
	rc := redis.NewClient(&redis.Options{Addr: exampleAddr, ContextTimeoutEnabled: true})
	defer func() { _ = rc.Close() }()
	locks, err := redislock.New([]redis.UniversalClient{rc}, &redislock.Options{Identity: "worker-1", AssumeDurable: true})
	if err != nil {
		panic(err)
	}
	held := make(chan redislock.Shard, 8)
	queues, err := locks.NewSharded(redislock.ShardedOptions{
		Name:   "queue-workers",
		Shards: 8,
		// Work on shard s until ctx ends; pass s.Fence along with
		// every write, so that a stale worker can be refused.
		OnStarted: func(ctx context.Context, s redislock.Shard) { held <- s },
		// Runs once the shard's work must stop, before it moves on.
		OnStopped: func(s redislock.Shard) {},
	})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- queues.Run(ctx) }()
	// Alone, this worker is given every shard.
	for range 8 {
		<-held
	}
	st := queues.State()
	fmt.Println("members:", st.Members, "shards held:", len(st.Held))
	// Leaving gives the shards back at once, for the other workers.
	cancel()
	fmt.Println("left:", <-done == nil)
	// Output:
	// members: 1 shards held: 8
	// left: true
}
