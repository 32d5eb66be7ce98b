package lockevents

import "strings"

// The events channel of the lock called name is prefix + name + suffix:
// the lock key ("redislock:{<name>}") followed by ":events". The Lua
// scripts derive it from the lock key the same way.
const (
	prefix = "redislock:{"
	suffix = "}:events"
)

// Channel returns the pub/sub channel on which the lock called name
// announces "acquired" and "released".
func Channel(name string) string { return prefix + name + suffix }

// Pattern is a PSUBSCRIBE pattern that matches the events channel of every
// lock.
const Pattern = prefix + "*" + suffix

// LockOf returns the name of the lock whose events channel is channel, and
// false for any other channel.
func LockOf(channel string) (string, bool) {
	name, ok := strings.CutPrefix(channel, prefix)
	if !ok {
		return "", false
	}
	return strings.CutSuffix(name, suffix)
}
