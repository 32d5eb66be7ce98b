package controller

import (
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/redislock/redislock/api/v1alpha1"
	"github.com/redislock/redislock/pkg/redisconn"
	"github.com/redislock/redislock/pkg/redislock"
)

// ConditionEvictionSafe says whether the lock's Redis nodes can evict its
// keys under memory pressure (maxmemory with a volatile-* or allkeys-*
// policy): False names the nodes and their policy.
const ConditionEvictionSafe = "EvictionSafe"

// Condition reasons.
const (
	ReasonReady              = "Ready"
	ReasonInvalidSpec        = "InvalidSpec"
	ReasonSecretNotFound     = "SecretNotFound"
	ReasonConnectionNotFound = "ConnectionNotFound"
	ReasonForbidden          = "Forbidden"
	ReasonNoQuorum           = "NoQuorum"
	ReasonMalformedValue     = "MalformedValue"
	ReasonHeld               = "Held"
	ReasonFree               = "Free"
	ReasonUnknown            = "Unknown"
	ReasonReachable          = "Reachable"
	ReasonNoExpiry           = "NoExpiry"
	ReasonNoEviction         = "NoEviction"
	ReasonEvictionPolicy     = "EvictionPolicy"
)

// setCondition sets one condition at the object's generation.
func setCondition(rl *v1alpha1.RedisLock, typ string, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&rl.Status.Conditions, metav1.Condition{
		Type: typ, Status: s, Reason: reason, Message: msg, ObservedGeneration: rl.Generation,
	})
}

// reasonFor names the condition reason of an error.
func reasonFor(err error) string {
	switch {
	case errors.Is(err, redisconn.ErrSecret):
		return ReasonSecretNotFound
	case errors.Is(err, redisconn.ErrConnection):
		return ReasonConnectionNotFound
	case apierrors.IsForbidden(err):
		return ReasonForbidden
	case errors.Is(err, redisconn.ErrInvalidSpec), errors.Is(err, redislock.ErrInvalidOptions):
		return ReasonInvalidSpec
	case errors.Is(err, redislock.ErrNoQuorum):
		return ReasonNoQuorum
	case errors.Is(err, redislock.ErrMalformedValue):
		return ReasonMalformedValue
	}
	return ReasonUnknown
}

// setUnusable records that the spec or its Secrets cannot be used: Redis
// was not asked, so reachability and holder are unknown.
func setUnusable(rl *v1alpha1.RedisLock, err error) {
	reason := reasonFor(err)
	setCondition(rl, v1alpha1.ConditionReady, metav1.ConditionFalse, reason, err.Error())
	for _, typ := range []string{v1alpha1.ConditionRedisReachable, v1alpha1.ConditionHeld} {
		setCondition(rl, typ, metav1.ConditionUnknown, reason, "Redis not contacted: "+reason)
	}
}

// applyHolder folds what Inspect saw (h, err) into the status and reports
// whether the holder changed. now stamps acquireTime for a new holder;
// leaderTransitions counts new holders after the first, as a Lease does.
func applyHolder(rl *v1alpha1.RedisLock, cfg redisconn.Config, h redislock.Holder, err error, now time.Time) (changed bool) {
	st := &rl.Status
	st.Nodes = nil
	if cfg.Mode == v1alpha1.ModeRedlock {
		for i, n := range h.Nodes {
			ns := v1alpha1.NodeStatus{Address: cfg.Addrs[i], Reachable: n.Err == nil}
			if n.Err != nil {
				ns.Message = n.Err.Error()
			}
			st.Nodes = append(st.Nodes, ns)
		}
	}
	if errors.Is(err, redislock.ErrNoQuorum) {
		setCondition(rl, v1alpha1.ConditionReady, metav1.ConditionFalse, ReasonNoQuorum, err.Error())
		setCondition(rl, v1alpha1.ConditionRedisReachable, metav1.ConditionFalse, ReasonNoQuorum, err.Error())
		setCondition(rl, v1alpha1.ConditionHeld, metav1.ConditionUnknown, ReasonNoQuorum, "Redis unreachable; last holder shown")
		return false
	}
	setCondition(rl, v1alpha1.ConditionRedisReachable, metav1.ConditionTrue, ReasonReachable, fmt.Sprintf("%d of %d nodes answered", reachable(h), len(h.Nodes)))
	switch {
	case err != nil:
		setCondition(rl, v1alpha1.ConditionReady, metav1.ConditionFalse, reasonFor(err), err.Error())
		setCondition(rl, v1alpha1.ConditionHeld, metav1.ConditionFalse, reasonFor(err), err.Error())
	case h.NoExpiry:
		msg := fmt.Sprintf("held by %s, but its key has no expiry (PERSIST?): if the holder dies the lock never frees itself; force-release it", h.Identity)
		setCondition(rl, v1alpha1.ConditionReady, metav1.ConditionFalse, ReasonNoExpiry, msg)
		setCondition(rl, v1alpha1.ConditionHeld, metav1.ConditionTrue, ReasonNoExpiry, msg)
	default:
		setCondition(rl, v1alpha1.ConditionReady, metav1.ConditionTrue, ReasonReady, "lock state read from Redis")
		if h.Identity != "" {
			setCondition(rl, v1alpha1.ConditionHeld, metav1.ConditionTrue, ReasonHeld, "held by "+h.Identity)
		} else {
			setCondition(rl, v1alpha1.ConditionHeld, metav1.ConditionFalse, ReasonFree, "no holder on a majority of nodes")
		}
	}
	// The token is a holder's: the last one seen stays while the lock is
	// free (a failed attempt may have left a counter on a node, Redis may
	// have lost them all), so a token says some holder was seen before.
	hadHolder := st.FencingToken > 0
	if h.Identity != "" {
		st.FencingToken = h.Fence
	}
	if h.Identity == st.HolderIdentity {
		return false
	}
	st.HolderIdentity = h.Identity
	st.AcquireTime = nil
	if h.Identity != "" {
		st.AcquireTime = &metav1.Time{Time: now}
		if hadHolder {
			st.LeaderTransitions++
		}
	}
	return true
}

func reachable(h redislock.Holder) int {
	n := 0
	for _, s := range h.Nodes {
		if s.Err == nil {
			n++
		}
	}
	return n
}
