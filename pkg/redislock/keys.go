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
//	redislock:{<name>}:until    in server time (ms since the epoch), until
//	                            when the last grant or renewal is valid;
//	                            never expiring, so that a vanished lock key
//	                            (DEL, eviction, force-release) is not free
//	                            before its holder's time is up
//	redislock:{<name>}:events   the pub/sub channel ("acquired", "released"),
//	                            named by internal/lockevents; the scripts
//	                            derive it from the lock key the same way
type lockKeys struct {
	name  string
	lock  string
	fence string
	until string
}

const (
	keyPrefix   = "redislock:{"
	fenceSuffix = "}:fence"
	untilSuffix = "}:until"
)

// checkName enforces the rules of lock names: non-empty and free of
// braces, which would break the hash tag.
func checkName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: lock name is empty", ErrInvalidOptions)
	}
	if strings.ContainsAny(name, "{}") {
		return fmt.Errorf("%w: lock name %q contains a brace, which would break its Cluster hash tag", ErrInvalidOptions, name)
	}
	return nil
}

// newAcquisition lays out the keys of a checked name and a fresh value for
// identity in one allocation: the strings share a buffer.
func newAcquisition(name, identity string) (lockKeys, string) {
	var b strings.Builder
	n := len(keyPrefix) + len(name) + len(fenceSuffix)
	b.Grow(2*n + valueLen(identity))
	writeKeys(&b, name)
	writeValue(&b, identity)
	s := b.String()
	return splitKeys(name, s[:2*n]), s[2*n:]
}

// keysFor lays out the keys of a checked name, for calls that write no
// value.
func keysFor(name string) lockKeys {
	var b strings.Builder
	b.Grow(2 * (len(keyPrefix) + len(name) + len(fenceSuffix)))
	writeKeys(&b, name)
	return splitKeys(name, b.String())
}

// writeKeys writes the fence key, then the until key, of name.
func writeKeys(b *strings.Builder, name string) {
	for _, suffix := range []string{fenceSuffix, untilSuffix} {
		b.WriteString(keyPrefix)
		b.WriteString(name)
		b.WriteString(suffix)
	}
}

// splitKeys takes the fence and until keys from s, as writeKeys wrote
// them, and the lock key from the fence key, of which it is a prefix.
func splitKeys(name, s string) lockKeys {
	fence, until := s[:len(s)/2], s[len(s)/2:]
	return lockKeys{name: name, lock: fence[:len(fence)-len(fenceSuffix)+1], fence: fence, until: until}
}
