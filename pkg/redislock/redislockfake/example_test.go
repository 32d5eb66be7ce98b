package redislockfake_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redislock/redislock/pkg/redislock"
	"github.com/redislock/redislock/pkg/redislock/redislockfake"
)

// A unit test of code that takes a *redislock.Client: the lock expires
// when the test moves the fake's time, not the wall clock.
func ExampleNew() {
	f, err := redislockfake.New(1, &redislock.Options{Identity: "worker-1"})
	if err != nil {
		panic(err)
	}
	defer f.Close()
	ctx := context.Background()
	lock, err := f.Client.Obtain(ctx, "nightly-report", 30*time.Second)
	if err != nil {
		panic(err)
	}
	_, err = f.Client.Obtain(ctx, "nightly-report", 30*time.Second)
	fmt.Println("held by another:", errors.Is(err, redislock.ErrNotObtained))
	f.Advance(30 * time.Second)
	fmt.Println("still valid after its ttl:", lock.Valid())
	_, err = f.Client.Obtain(ctx, "nightly-report", 30*time.Second)
	fmt.Println("free again:", err == nil)
	// Output:
	// held by another: true
	// still valid after its ttl: false
	// free again: true
}
