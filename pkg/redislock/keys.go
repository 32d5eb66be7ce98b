package redislock

import (
	"fmt"
	"strings"
)

// Redis names derived from a lock name and Options.KeyPrefix (P, default
// "redislock:"). The name sits in a hash tag, so a lock's keys share one
// Cluster slot:
//
//	P{<name>}          the lock key, holding the holder's value
//	P{<name>}:fence    the fencing counter; it expires once the lock has
//	                   been idle (no grant, renewal or raise) for
//	                   max(24h, 100 × ttl): see fenceLifetime
//	P{<name>}:until    in server time (ms since the epoch), until when the
//	                   last grant or renewal is valid, so that a vanished
//	                   lock key (DEL, eviction, force-release) is not free
//	                   before its holder's time is up. It never expires:
//	                   with an expiry a volatile-* eviction policy could
//	                   take it with the lock key. Release deletes it; a
//	                   holder that never released leaves it until the
//	                   name's next grant
//	P{<name>}:meta     the holder's metadata (ObtainOptions.Metadata),
//	                   living as long as the lock key
//	P{<name>}:events   the pub/sub channel ("acquired", "released"); the
//	                   scripts derive it from the lock key the same way
//	P{<name>}:shards   a sharded lock's state: its members and each shard's
//	                   holder, validity and fencing counter, in one hash
//	                   that never expires (see shards.lua)
//	P{<name>}:shards:until  the latest validity a sharded lock's hash
//	                   recorded, which a deleted hash leaves behind
//
// and the node's epoch marker, shared by every lock (see epoch.go).
type lockKeys struct {
	name  string
	lock  string
	fence string
	until string
	meta  string
	// epoch is the epoch marker's key, set where an acquisition needs it.
	epoch string
}

// DefaultKeyPrefix is the prefix of every key and channel of a lock when
// Options.KeyPrefix is empty.
const DefaultKeyPrefix = "redislock:"

const (
	fenceSuffix  = "}:fence"
	untilSuffix  = "}:until"
	metaSuffix   = "}:meta"
	eventsSuffix = ":events"
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

// newAcquisition lays out the keys of a checked name under prefix and a
// fresh value for identity in one allocation: the strings share a buffer.
func newAcquisition(prefix, name, identity string) (lockKeys, string) {
	var b strings.Builder
	n := keysLen(prefix, name)
	b.Grow(n + valueLen(identity))
	writeKeys(&b, prefix, name)
	writeValue(&b, identity)
	s := b.String()
	return splitKeys(prefix, name, s[:n]), s[n:]
}

// keysFor lays out the keys of a checked name under prefix, for calls that
// write no value.
func keysFor(prefix, name string) lockKeys {
	var b strings.Builder
	b.Grow(keysLen(prefix, name))
	writeKeys(&b, prefix, name)
	return splitKeys(prefix, name, b.String())
}

var suffixes = [...]string{fenceSuffix, untilSuffix, metaSuffix}

// keysLen is the length of what writeKeys writes.
func keysLen(prefix, name string) int {
	n := 0
	for _, s := range suffixes {
		n += len(prefix) + 1 + len(name) + len(s)
	}
	return n
}

// writeKeys writes the fence, until and meta keys of name, in that order.
func writeKeys(b *strings.Builder, prefix, name string) {
	for _, suffix := range suffixes {
		b.WriteString(prefix)
		b.WriteByte('{')
		b.WriteString(name)
		b.WriteString(suffix)
	}
}

// splitKeys takes the keys from s, as writeKeys wrote them, and the lock
// key from the fence key, of which it is a prefix.
func splitKeys(prefix, name, s string) lockKeys {
	base := len(prefix) + 1 + len(name)
	fence, s := s[:base+len(fenceSuffix)], s[base+len(fenceSuffix):]
	until, meta := s[:base+len(untilSuffix)], s[base+len(untilSuffix):]
	return lockKeys{name: name, lock: fence[:base+1], fence: fence, until: until, meta: meta}
}

// shards is the state hash of the sharded lock whose keys are k, and
// shardsUntil its validity floor (see shards.lua).
func (k lockKeys) shards() string      { return k.lock + ":shards" }
func (k lockKeys) shardsUntil() string { return k.lock + ":shards:until" }

// channel is the events channel of the lock whose keys are k.
func (k lockKeys) channel() string { return k.lock + eventsSuffix }
