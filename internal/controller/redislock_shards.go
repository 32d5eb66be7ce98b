package controller

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/pkg/redisconn"
	"github.com/redislock/redislock/pkg/redislock"
)

// Condition reasons of a sharded lock.
const (
	ReasonShardsOwned   = "AllOwned"
	ReasonShardsUnowned = "Unowned"
)

// EventShardsUnowned is the event of a sharded lock whose shards stop all
// having a holder.
const EventShardsUnowned = "ShardsUnowned"

// applyShards folds what InspectShards saw (v, err) into the status of
// rl, a sharded lock, and reports whether its holders changed. It
// returns, as a Holder for nextLook, the earliest time a shard's holder
// runs out, since an expiry sends no message.
func applyShards(rl *v1alpha1.RedisLock, cfg redisconn.Config, v redislock.ShardsView, err error, now time.Time) (changed bool, next redislock.Holder) {
	if err != nil {
		// One node: its fault is the inspection's.
		h := redislock.Holder{Nodes: []redislock.NodeState{{Err: err}}}
		return applyHolder(rl, cfg, h, err, now), h
	}
	st := &rl.Status
	setCondition(rl, v1alpha1.ConditionRedisReachable, metav1.ConditionTrue, ReasonReachable, "1 of 1 nodes answered")
	setCondition(rl, v1alpha1.ConditionReady, metav1.ConditionTrue, ReasonReady, "lock state read from Redis")
	counts := map[string]int32{}
	for _, s := range v.Shards {
		if s.Identity == "" {
			continue
		}
		counts[s.Identity]++
		if next.FreeIn == 0 || s.FreeIn < next.FreeIn {
			next.Identity, next.FreeIn = s.Identity, s.FreeIn
		}
	}
	holders := make([]v1alpha1.ShardHolderStatus, 0, len(counts))
	for id, n := range counts {
		holders = append(holders, v1alpha1.ShardHolderStatus{Identity: id, Shards: n})
	}
	slices.SortFunc(holders, func(a, b v1alpha1.ShardHolderStatus) int { return strings.Compare(a.Identity, b.Identity) })
	held, total := int32(v.Held()), int32(len(v.Shards))
	if held == 0 {
		setCondition(rl, v1alpha1.ConditionHeld, metav1.ConditionFalse, ReasonFree, fmt.Sprintf("none of the %d shards has a holder", total))
	} else {
		setCondition(rl, v1alpha1.ConditionHeld, metav1.ConditionTrue, ReasonHeld, fmt.Sprintf("%d of %d shards held, by %d candidates", held, total, len(holders)))
	}
	if held < total {
		setCondition(rl, v1alpha1.ConditionShardsUnowned, metav1.ConditionTrue, ReasonShardsUnowned, fmt.Sprintf("%d of %d shards have no holder (%d live candidates)", total-held, total, len(v.Members)))
	} else {
		setCondition(rl, v1alpha1.ConditionShardsUnowned, metav1.ConditionFalse, ReasonShardsOwned, fmt.Sprintf("every shard has a holder (%d live candidates)", len(v.Members)))
	}
	changed = st.ShardsHeld == nil || *st.ShardsHeld != held || !slices.Equal(st.ShardHolders, holders)
	st.ShardsHeld, st.ShardHolders = &held, holders
	st.HolderIdentity, st.AcquireTime = "", nil
	return changed, next
}
