package redislock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/pkg/redislock"
)

// The pattern matches only events channels under its prefix, glob
// characters in the prefix taken literally, and each channel gives back
// its lock's name. Whether Redis matches the pattern as intended is
// TestWatchEventsHearsLocksUnderItsKeyPrefix's part.
func TestEventsChannelNamesRoundTrip(t *testing.T) {
	for _, name := range []string{"job", "ns/leader", "a:b"} {
		ch := redislock.EventsChannel(name)
		if got, ok := redislock.LockOfChannel(redislock.DefaultKeyPrefix, ch); !ok || got != name {
			t.Errorf("LockOfChannel(%q) = %q, %v; want %q", ch, got, ok, name)
		}
	}
	for _, ch := range []string{"redislock:{job}:fence", "other:{job}:events", "redislock:{job}", "redislock:{a{b}:events"} {
		if got, ok := redislock.LockOfChannel(redislock.DefaultKeyPrefix, ch); ok {
			t.Errorf("LockOfChannel(%q) = %q; want no lock", ch, got)
		}
	}
	if got, want := redislock.EventsPattern(`a*b?[c]\:`), `a\*b\?\[c\]\\:{*}:events`; got != want {
		t.Errorf("EventsPattern = %q; want %q", got, want)
	}
}

// A Client with a KeyPrefix hears the grants and releases of its own
// prefix's locks, by name, and none of another prefix's: the controller
// finds out about changes this way.
func TestWatchEventsHearsLocksUnderItsKeyPrefix(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	ctx := context.Background()
	client := func(prefix string) *redislock.Client {
		c, err := redislock.New(redistest.Clients(t, s), &redislock.Options{AssumeDurable: true, Identity: "p", KeyPrefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	heard := make(chan string, 16)
	stop := client("app*:").WatchEvents(ctx, func(name string) { heard <- name })
	defer stop()
	for _, prefix := range []string{"app:", redislock.DefaultKeyPrefix, "app*:"} {
		l, err := client(prefix).Obtain(ctx, "team/job-"+prefix, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"team/job-app*:", "team/job-app*:"} { // the grant, then the release
		select {
		case got := <-heard:
			if got != want {
				t.Fatalf("heard %q; want %q (only the watcher's own prefix)", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("heard nothing of %q's grant and release", want)
		}
	}
	stop()
	select {
	case got := <-heard:
		t.Fatalf("heard %q more than the grant and the release", got)
	default:
	}
}
