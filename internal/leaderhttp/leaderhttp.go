// Package leaderhttp is GET /leader: the answer a candidate gives about its
// own leadership (the agent's, and the sample operator's for the chaos
// checker), the handler that serves it and the client that asks for it.
// The JSON is the one README.md documents; the status code is 200 while
// the candidate leads and 503 otherwise.
package leaderhttp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Status is the /leader answer (and the agent's leader file).
type Status struct {
	// Leading reports whether this pod leads at ObservedAt.
	Leading bool `json:"leading"`
	// Identity is this pod's identity (its name).
	Identity string `json:"identity"`
	// Holder is the identity of the leader last observed; empty when
	// unknown, as right after this pod stepped down.
	Holder string `json:"holder,omitempty"`
	// Lock is the lock's name in Redis (the RedisLock's status.lockName).
	Lock string `json:"lock"`
	// FencingToken is the held lock's fencing token while Leading. Pass it
	// to any downstream system that can reject stale writers.
	FencingToken int64 `json:"fencingToken,omitempty"`
	// ValidUntil is the step-down deadline while Leading: the app may act
	// as leader until then unless a later answer extends it.
	ValidUntil *time.Time `json:"validUntil,omitempty"`
	// ObservedAt is the instant the answer is true of.
	ObservedAt time.Time `json:"observedAt"`
	// ShardCount is, for a sharded lock, its number of shards
	// (spec.shards); 0 for a lock with one holder.
	ShardCount int `json:"shardCount,omitempty"`
	// Shards lists, for a sharded lock, the shards this pod holds at
	// ObservedAt, by index; Leading is true while it holds one or more.
	Shards []Shard `json:"shards,omitempty"`
	// Error says why the agent cannot campaign, or why its last attempt
	// failed for a reason other than another pod's leading: the RedisLock
	// cannot be read, Redis is unreachable, the restart guard holds the
	// lock back, the key holds a value this project did not write. Empty
	// while it leads or a healthy standby.
	Error string `json:"error,omitempty"`
}

// Shard is one shard of a sharded lock that the pod holds.
type Shard struct {
	// Index is the shard's number, from 0 to ShardCount-1.
	Index int `json:"index"`
	// FencingToken is this grant's token: pass it along with the shard's
	// writes.
	FencingToken int64 `json:"fencingToken"`
	// ValidUntil is the shard's step-down deadline: the app may work on
	// the shard until then unless a later answer drops it or extends it.
	ValidUntil time.Time `json:"validUntil"`
}

// Handler answers each request with status() as JSON, never cached: 200
// when it says Leading, else 503. status is called once per request, so
// the code and the body agree.
func Handler(status func() Status) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { answer(w, status()) })
}

// answer writes st as the /leader answer.
func answer(w http.ResponseWriter, st Status) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if st.Leading {
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(st) // the client is gone; nothing to tell
}

// Get asks url (http://host:port/leader) once, within ctx, and returns the
// answer and its status code. An error means no answer: refused, timed
// out, or a body that is not a Status.
func Get(ctx context.Context, url string) (Status, int, error) {
	var st Status
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return st, 0, fmt.Errorf("leaderhttp: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, 0, fmt.Errorf("leaderhttp: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, 0, fmt.Errorf("leaderhttp: GET %s: %d with a body that is not a status: %w", url, resp.StatusCode, err)
	}
	return st, resp.StatusCode, nil
}
