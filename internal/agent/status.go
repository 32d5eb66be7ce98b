package agent

import (
	"github.com/redislock/redislock/internal/leaderhttp"
	"github.com/redislock/redislock/pkg/redislock"
)

// statusOf turns an elector state into the /leader answer.
func statusOf(identity, lock string, s redislock.State) leaderhttp.Status {
	st := leaderhttp.Status{Leading: s.Leading, Identity: identity, Holder: s.Leader, Lock: lock, ObservedAt: s.At}
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
