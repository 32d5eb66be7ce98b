package controller

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
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

// reasonFor names the condition reason of an error: the sentinel of a
// spec the controller cannot use, ErrNoQuorum, else the fault classify
// finds.
func reasonFor(err error) string {
	switch {
	case errors.Is(err, ErrInlineRedis):
		return ReasonInlineRedisForbidden
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
	}
	return classify(err)
}

// setUnusable records that the spec or its Secrets cannot be used: Redis
// was not asked, so reachability and holder are unknown.
func setUnusable(rl *v1alpha1.RedisLock, err error) {
	reason, msg := describe(err)
	setCondition(rl, v1alpha1.ConditionReady, metav1.ConditionFalse, reason, msg)
	for _, typ := range []string{v1alpha1.ConditionRedisReachable, v1alpha1.ConditionHeld} {
		setCondition(rl, typ, metav1.ConditionUnknown, reason, "Redis not contacted: "+reason)
	}
}

// conditionMessage returns the message of rl's condition typ: what an
// event about it says too.
func conditionMessage(rl *v1alpha1.RedisLock, typ string) string {
	if c := meta.FindStatusCondition(rl.Status.Conditions, typ); c != nil {
		return c.Message
	}
	return ""
}

// applyHolder folds what Inspect saw (h, err) into the status and reports
// whether the holder changed; errNotAsked changes nothing once Redis is
// shown unreachable. now stamps acquireTime for a new holder;
// leaderTransitions counts new holders after the first, as a Lease does.
func applyHolder(rl *v1alpha1.RedisLock, cfg redisconn.Config, h redislock.Holder, err error, now time.Time) (changed bool) {
	st := &rl.Status
	if errors.Is(err, errNotAsked) && meta.IsStatusConditionFalse(st.Conditions, v1alpha1.ConditionRedisReachable) {
		// Redis was not asked: what the last look found, and why, stands.
		return false
	}
	st.Nodes = nodeStatuses(cfg, h)
	if errors.Is(err, redislock.ErrNoQuorum) {
		reason, msg := quorumFault(cfg, h, err)
		setCondition(rl, v1alpha1.ConditionReady, metav1.ConditionFalse, ReasonNoQuorum, msg)
		setCondition(rl, v1alpha1.ConditionRedisReachable, metav1.ConditionFalse, reason, msg)
		setCondition(rl, v1alpha1.ConditionHeld, metav1.ConditionUnknown, ReasonNoQuorum, "Redis unreachable; last holder shown")
		return false
	}
	setCondition(rl, v1alpha1.ConditionRedisReachable, metav1.ConditionTrue, ReasonReachable, fmt.Sprintf("%d of %d nodes answered", reachable(h), len(h.Nodes)))
	switch {
	case err != nil:
		reason, msg := describe(err)
		setCondition(rl, v1alpha1.ConditionReady, metav1.ConditionFalse, reason, msg)
		setCondition(rl, v1alpha1.ConditionHeld, metav1.ConditionFalse, reason, msg)
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

// nodeStatuses is status.nodes of a Redlock lock: each node's address,
// and, for one that did not answer, the message of its fault; nil in the
// other modes.
func nodeStatuses(cfg redisconn.Config, h redislock.Holder) []v1alpha1.NodeStatus {
	if cfg.Mode != v1alpha1.ModeRedlock {
		return nil
	}
	var out []v1alpha1.NodeStatus
	for i, n := range h.Nodes {
		ns := v1alpha1.NodeStatus{Address: cfg.Addrs[i], Reachable: n.Err == nil}
		if n.Err != nil {
			ns.Message = faultMessage(classify(n.Err))
		}
		out = append(out, ns)
	}
	return out
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

// quorumFault returns the RedisReachable reason and the message of an
// inspection that too few nodes answered: the nodes' fault when they share
// one (ReasonNoQuorum when they differ), and a message of the vocabulary
// naming each failed node by the address the spec gives it. An err of no
// node's (errNotAsked) is the controller's own, and says so.
func quorumFault(cfg redisconn.Config, h redislock.Holder, err error) (reason, msg string) {
	var failed []string
	for i, n := range h.Nodes {
		if n.Err == nil {
			continue
		}
		r := classify(n.Err)
		switch {
		case reason == "":
			reason = r
		case reason != r:
			reason = ReasonNoQuorum
		}
		failed = append(failed, fmt.Sprintf("node %d (%s) %s", i, nodeAddr(cfg, i), r))
	}
	switch {
	case len(failed) == 0 && errors.Is(err, errNotAsked):
		return ReasonNoQuorum, err.Error()
	case len(failed) == 0:
		return ReasonNoQuorum, faultMessage(ReasonNoQuorum)
	case len(h.Nodes) == 1:
		return reason, strings.Join(cfg.Addrs, ", ") + ": " + faultMessage(reason)
	}
	return reason, fmt.Sprintf("%d of %d nodes answered, too few to decide: %s (status.nodes has each node's message)", reachable(h), len(h.Nodes), strings.Join(failed, ", "))
}

// nodeAddr is the address the spec gives node i: its Redlock address.
func nodeAddr(cfg redisconn.Config, i int) string {
	if cfg.Mode == v1alpha1.ModeRedlock && i < len(cfg.Addrs) {
		return cfg.Addrs[i]
	}
	return strings.Join(cfg.Addrs, ", ")
}

// logFaults writes to the log the errors whose text the status leaves
// out, once each: an inspection's error other than ErrNoQuorum (which
// observe logs with its event) when the Ready condition's reason changes,
// and each node's error when that node's message changes, as a node of a
// Redlock lock fails while a majority answers.
func logFaults(log logr.Logger, before, now *v1alpha1.RedisLock, h redislock.Holder, err error) {
	if err != nil && !errors.Is(err, redislock.ErrNoQuorum) {
		if c := meta.FindStatusCondition(before.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Reason != reasonFor(err) {
			log.Info("cannot read the lock", "reason", reasonFor(err), "error", err.Error())
		}
		return
	}
	if err != nil {
		return
	}
	for i, n := range now.Status.Nodes {
		if n.Reachable || i >= len(h.Nodes) || h.Nodes[i].Err == nil {
			continue
		}
		if i < len(before.Status.Nodes) && before.Status.Nodes[i].Message == n.Message {
			continue
		}
		log.Info("Redis node did not answer", "node", i, "address", n.Address, "reason", classify(h.Nodes[i].Err), "error", h.Nodes[i].Err.Error())
	}
}

// evictionMessage is the message of an eviction check's error: the
// vocabulary's, never the nodes' INFO replies, which the log has.
func evictionMessage(err error) string {
	if errors.Is(err, redislock.ErrEvictionPolicy) {
		return "a node of this lock has a maxmemory limit and a maxmemory-policy other than noeviction, so Redis can evict lock keys under memory pressure: set maxmemory-policy noeviction, or give the locks a Redis of their own (the controller's log names the nodes and their policy)"
	}
	_, msg := describe(err)
	return msg
}
