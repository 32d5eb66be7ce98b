package redislock_test

import (
	"testing"

	"github.com/redislock/redislock/pkg/redislock"
)

// EventsPattern is checked against a real Redis by the controller's tests,
// whose lock names contain slashes (Redis's glob lets * match them).
func TestEventsChannelRoundTrip(t *testing.T) {
	for _, name := range []string{"job", "ns/leader", "a:b"} {
		ch := redislock.EventsChannel(name)
		if got, ok := redislock.LockOfChannel(ch); !ok || got != name {
			t.Errorf("LockOfChannel(%q) = %q, %v; want %q", ch, got, ok, name)
		}
	}
	for _, ch := range []string{"redislock:{job}:fence", "other:{job}:events", "redislock:{job}"} {
		if got, ok := redislock.LockOfChannel(ch); ok {
			t.Errorf("LockOfChannel(%q) = %q; want no lock", ch, got)
		}
	}
}
