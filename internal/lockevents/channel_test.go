package lockevents_test

import (
	"testing"

	"github.com/redislock/redislock/internal/lockevents"
)

// Pattern is checked against a real Redis by the controller's tests, whose
// lock names contain slashes (Redis's glob lets * match them), and Channel
// against the scripts' PUBLISH by pkg/redislock's.
func TestChannelRoundTrip(t *testing.T) {
	for _, name := range []string{"job", "ns/leader", "a:b"} {
		ch := lockevents.Channel(name)
		if got, ok := lockevents.LockOf(ch); !ok || got != name {
			t.Errorf("LockOf(%q) = %q, %v; want %q", ch, got, ok, name)
		}
	}
	for _, ch := range []string{"redislock:{job}:fence", "other:{job}:events", "redislock:{job}"} {
		if got, ok := lockevents.LockOf(ch); ok {
			t.Errorf("LockOf(%q) = %q; want no lock", ch, got)
		}
	}
}
