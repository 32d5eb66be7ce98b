package agent

import (
	"time"

	"github.com/redislock/redislock/pkg/redislock"
)

// Status is the /leader answer and the leader file's content.
type Status struct {
	// Leading reports whether this pod leads at ObservedAt.
	Leading bool `json:"leading"`
	// Identity is this pod's identity (its name).
	Identity string `json:"identity"`
	// Holder is the identity of the leader last observed; empty when
	// unknown, as right after this pod stepped down.
	Holder string `json:"holder,omitempty"`
	// Lock is the lock's name in Redis, "<namespace>/<lockName>".
	Lock string `json:"lock"`
	// FencingToken is the held lock's fencing token while Leading. Pass it
	// to any downstream system that can reject stale writers.
	FencingToken int64 `json:"fencingToken,omitempty"`
	// ValidUntil is the step-down deadline while Leading: the app may act
	// as leader until then unless a later answer extends it.
	ValidUntil *time.Time `json:"validUntil,omitempty"`
	// ObservedAt is the instant the answer is true of.
	ObservedAt time.Time `json:"observedAt"`
	// Error says why the agent cannot campaign, or why its last attempt
	// failed for a reason other than another pod's leading: the RedisLock
	// cannot be read, Redis is unreachable, the restart guard holds the
	// lock back, the key holds a value this project did not write. Empty
	// while it leads or a healthy standby.
	Error string `json:"error,omitempty"`
}

// statusOf turns an elector state into a Status.
func statusOf(identity, lock string, s redislock.State) Status {
	st := Status{Leading: s.Leading, Identity: identity, Holder: s.Leader, Lock: lock, ObservedAt: s.At}
	if s.Leading {
		st.FencingToken = s.Fence
		until := s.ValidUntil
		st.ValidUntil = &until
	}
	if s.Err != nil {
		st.Error = s.Err.Error()
	}
	return st
}
