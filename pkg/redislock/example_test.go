package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

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
