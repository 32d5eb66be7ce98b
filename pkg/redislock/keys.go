package redislock

import (
	"fmt"
	"strings"
)

// Redis names derived from a lock name. The name sits in a hash tag, so a
// lock's keys share one Cluster slot:
//
//	redislock:{<name>}          the lock key, holding the holder's value
//	redislock:{<name>}:fence    the fencing counter, never expiring
//	redislock:{<name>}:events   the pub/sub channel ("acquired", "released")
//
// The scripts derive the channel from the lock key the same way.
type lockKeys struct {
	name string
	// both is {lock key, fence key}, as the scripts take them.
	both []string
}

// EventsChannel returns the pub/sub channel on which the lock called name
// announces "acquired" and "released".
func EventsChannel(name string) string { return lockKey(name) + ":events" }

func lockKey(name string) string { return "redislock:{" + name + "}" }

// newLockKeys checks name and derives its keys. A name must be non-empty and
// free of braces, which would break the hash tag.
func newLockKeys(name string) (lockKeys, error) {
	if name == "" {
		return lockKeys{}, fmt.Errorf("%w: lock name is empty", ErrInvalidOptions)
	}
	if strings.ContainsAny(name, "{}") {
		return lockKeys{}, fmt.Errorf("%w: lock name %q contains a brace, which would break its Cluster hash tag", ErrInvalidOptions, name)
	}
	k := lockKey(name)
	return lockKeys{name: name, both: []string{k, k + ":fence"}}, nil
}
