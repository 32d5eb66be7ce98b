package redislock

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Every error this package returns wraps one of them, so
// callers branch with errors.Is and never on message text.
var (
	// ErrNotObtained means the lock is held by another token on a majority
	// of nodes. It is the normal outcome of losing a race, not a fault.
	ErrNotObtained = errors.New("redislock: not obtained")

	// ErrGuarded means a free lock is held back for a while because a
	// holder may still believe it holds it: a majority of nodes started,
	// or loaded their data from disk, or were flushed, less than a ttl ago
	// and may have lost the lock's latest grant (the restart guard), or the lock's key vanished (a DEL, an eviction, a
	// force-release) before the time its last renewal was valid for.
	// Nobody holds it now, and it can be granted once the wait is over (see
	// GuardedError); it is not ErrNotObtained.
	ErrGuarded = errors.New("redislock: held back")

	// ErrNoQuorum means too few nodes answered (down, slow, or refusing
	// the command) to decide. The wrapped errors name the nodes and why.
	ErrNoQuorum = errors.New("redislock: no quorum")

	// ErrLockLost means a renewal found the lock gone or held by another
	// token on a majority of nodes, or the lock's local deadline passed. The
	// holder must stop acting as the holder at once.
	ErrLockLost = errors.New("redislock: lock lost")

	// ErrNotHeld means a release found none of the lock's keys still
	// carrying this lock's token: it had expired (and may be held by
	// someone else now, whom the release left untouched).
	ErrNotHeld = errors.New("redislock: not held")

	// ErrInvalidOptions means a constructor or call was given a value
	// that breaks one of its documented rules; the message names the rule.
	ErrInvalidOptions = errors.New("redislock: invalid options")

	// ErrReplication means a node's replicas did not acknowledge a write
	// within the node timeout (Options.WaitReplicas); the node counts as
	// failed for that call, so it comes wrapped in ErrNoQuorum or
	// ErrLockLost too.
	ErrReplication = errors.New("redislock: replication")

	// ErrMalformedValue means a lock key holds a value that this package
	// did not write, or wrote in a format version it does not know.
	ErrMalformedValue = errors.New("redislock: malformed value")

	// ErrNoScripting means a node does not run Lua scripts (EVALSHA and
	// EVAL are unknown or disabled: Valkey 9.1 can be built without Lua),
	// which every lock operation needs. It comes wrapped in the error of
	// the call, ErrNoQuorum or ErrLockLost among them.
	ErrNoScripting = errors.New("redislock: the server runs no Lua scripts, which every lock operation needs")

	// ErrUnhealthy means the app a candidate speaks for is unhealthy (see
	// Health): it does not campaign, and a leader that stays so steps
	// down.
	ErrUnhealthy = errors.New("redislock: the app is unhealthy")

	// ErrNotAdmitted means an Elector holds its lock but has not been
	// admitted to lead yet (see ElectorOptions.Admitted), or was refused.
	ErrNotAdmitted = errors.New("redislock: holds the lock, not admitted to lead")
)

// GuardedError is the error, wrapping ErrGuarded, of an acquisition the
// restart guard refused. Get it with errors.As to learn when to try again.
type GuardedError struct {
	// Name is the lock's name.
	Name string
	// Wait is how long until a majority of nodes may grant the lock, as
	// the nodes reported it (at most a ttl and a second).
	Wait time.Duration
	// KeyVanished is true when the lock's key vanished before its holder's
	// time was up (a DEL, an eviction, a force-release), false for the
	// restart guard.
	KeyVanished bool
}

func (e *GuardedError) Error() string {
	if e.KeyVanished {
		return fmt.Sprintf("%v: %q: its key vanished (a DEL, an eviction, a force-release) before its last holder's renewal ran out, and that holder may still act; it can be granted in %v", ErrGuarded, e.Name, e.Wait)
	}
	return fmt.Sprintf("%v: %q: a majority of nodes restarted or were flushed less than a ttl ago and may have lost the lock's latest grant, so a holder from before may still act; it can be granted in %v (see Options.AssumeDurable)", ErrGuarded, e.Name, e.Wait)
}

// Unwrap returns ErrGuarded.
func (e *GuardedError) Unwrap() error { return ErrGuarded }
