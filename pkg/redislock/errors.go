package redislock

import "errors"

// Sentinel errors. Every error this package returns wraps one of them, so
// callers branch with errors.Is and never on message text.
var (
	// ErrNotObtained means the lock is held by another token on a majority
	// of nodes. It is the normal outcome of losing a race, not a fault.
	ErrNotObtained = errors.New("redislock: not obtained")

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
)
