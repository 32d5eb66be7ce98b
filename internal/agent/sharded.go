package agent

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/redislock/redislock/internal/leaderhttp"
	"github.com/redislock/redislock/pkg/redisconn"
	"github.com/redislock/redislock/pkg/redislock"
)

// shardable says why the agent cannot campaign for cand, a sharded lock,
// with its options: what it does while leading (a command, the health
// gate, fencing) is for a lock with one holder. Nil for an unsharded lock.
func (a *Agent) shardable(cand *redisconn.Candidate) error {
	if cand.Object.Spec.Shards == nil {
		return nil
	}
	var not []string
	if len(a.o.Command) > 0 {
		not = append(not, "run a command while leading (redislock.io/run-container)")
	}
	if a.o.Health != "" {
		not = append(not, "gate on health (redislock.io/health)")
	}
	if a.o.Fencing {
		not = append(not, "wait for fencing (redislock.io/fencing)")
	}
	if len(not) == 0 {
		return nil
	}
	return fmt.Errorf("%w: RedisLock %s is sharded (spec.shards %d): the agent does not %s for a sharded lock; it reports the pod's shards in /leader, the file, the label and the hook",
		ErrInvalidOptions, a.o.Lock, *cand.Object.Spec.Shards, strings.Join(not, ", nor "))
}

// campaignSharded campaigns for the shards of cand, as campaign does for
// a lock: the candidate, the label and file, and the hook, under one
// errgroup. A shard moves to another pod only once the hook's run that
// reports it gone has returned (bounded by the ttl), so that an app that
// follows the hook has stopped its work on the shard first.
func (a *Agent) campaignSharded(ctx context.Context, cand *redisconn.Candidate) error {
	changed, hooked := make(chan struct{}, 1), make(chan struct{}, 1)
	notify := a.notifier(changed, hooked)
	sh, err := cand.Client.NewSharded(redislock.ShardedOptions{
		Name: cand.Name, Shards: int(*cand.Object.Spec.Shards), Timing: cand.Timing,
		OnStarted: func(context.Context, redislock.Shard) { notify() },
		OnStopped: func(s redislock.Shard) {
			asked := notify()
			if a.o.Hook == "" {
				return
			}
			wait, cancel := context.WithTimeout(context.WithoutCancel(ctx), cand.Timing.TTL)
			defer cancel()
			if !a.hooks.wait(wait, asked) {
				a.o.Logger.Info("the hook did not report a shard's loss within the ttl; handing it over", "shard", s.Index, "fence", s.Fence)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	a.mu.Lock()
	a.sharded, a.shards, a.name, a.openErr = sh, int(*cand.Object.Spec.Shards), cand.Name, nil
	a.mu.Unlock()

	reports, endReports := context.WithCancel(context.WithoutCancel(ctx))
	var parts errgroup.Group
	parts.Go(func() error {
		defer endReports()
		if err := sh.Run(ctx); err != nil {
			return fmt.Errorf("agent: campaign: %w", err)
		}
		return nil
	})
	a.report(reports, &parts, changed, hooked, cand)
	return parts.Wait()
}

// statusOfShards turns a sharded candidate's state into the /leader answer.
func statusOfShards(identity, lock string, count int, s redislock.ShardedState) leaderhttp.Status {
	st := leaderhttp.Status{Leading: len(s.Held) > 0, Identity: identity, Lock: lock, ObservedAt: s.At, ShardCount: count}
	for _, h := range s.Held {
		st.Shards = append(st.Shards, leaderhttp.Shard{Index: h.Index, FencingToken: h.Fence, ValidUntil: h.ValidUntil})
	}
	if s.Err != nil {
		st.Error = s.Err.Error()
	}
	return st
}

// shardsKey is the shards of st with their tokens, "index:token,...": a
// change of it is a change for the hook.
func shardsKey(st leaderhttp.Status) string {
	var b strings.Builder
	for _, s := range st.Shards {
		b.WriteString(strconv.Itoa(s.Index))
		b.WriteByte(':')
		b.WriteString(strconv.FormatInt(s.FencingToken, 10))
		b.WriteByte(',')
	}
	return b.String()
}

// hookProgress counts the changes notified and those the hook has
// reported, so that a shard's handover can wait for the run that reports
// it gone.
type hookProgress struct {
	mu    sync.Mutex
	asked uint64        // changes notified so far
	done  uint64        // the changes that ended hook runs had seen
	ran   chan struct{} // closed, and replaced, at the end of each run
}

// ask counts a change and returns its number.
func (h *hookProgress) ask() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.asked++
	return h.asked
}

// begin returns the number of the changes a run starting now reports.
func (h *hookProgress) begin() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.asked
}

// end records that a run which began at seen has ended.
func (h *hookProgress) end(seen uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.done = max(h.done, seen)
	if h.ran != nil {
		close(h.ran)
	}
	h.ran = make(chan struct{})
}

// wait returns true once a run that saw change n has ended, false if ctx
// ends first.
func (h *hookProgress) wait(ctx context.Context, n uint64) bool {
	for {
		h.mu.Lock()
		if h.ran == nil {
			h.ran = make(chan struct{})
		}
		done, ran := h.done >= n, h.ran
		h.mu.Unlock()
		if done {
			return true
		}
		select {
		case <-ran:
		case <-ctx.Done():
			return false
		}
	}
}
