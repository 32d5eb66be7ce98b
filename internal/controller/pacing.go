package controller

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	"github.com/redislock/redislock/api/v1alpha1"
)

// Pacing: what a RedisLock's Redis answers, which its user chooses (her own
// server, or a loop of her own writing to it), can cost the controller and
// the API server only so much (B1). For each RedisLock, whatever its Redis
// answers:
//
//  1. the controller looks at the lock (an Inspect, which the pub/sub
//     messages of grants and releases, the holder's expiry and the
//     controller's own writes all ask for) at most lookBurst times at once,
//     then at most looksPerRenewInterval times per renewInterval; a
//     reconcile that comes sooner does nothing but wait for its turn;
//  2. it shows what its looks saw (one status apply, with its Events and
//     the holder metric's series) at most showBurst times at once, then at
//     most once per renewInterval. What a look saw before its turn is kept,
//     unwritten, and shown at the turn with what later looks saw: the
//     holder changes in between are counted (status.leaderTransitions, and
//     one LeaderChanged event with their number), not each shown.
//
// A lock that has been quiet for showBurst renewIntervals shows its next
// showBurst changes at once, as without pacing: a graceful handover (a
// release, then the next grant) right after another change is shown in
// milliseconds; only a burst of changes waits. Time is the reconciler's
// Clock.
const (
	// showBurst is a change, then a handover through a free lock (its
	// release and the next grant).
	showBurst = 3
	// lookBurst is the looks of such a handover and the ones its writes
	// cause (each status apply comes back as a watch event, a reconcile
	// and a look), with room for a grant announced by several Redlock
	// nodes.
	lookBurst             = 8
	looksPerRenewInterval = 4
)

// pacer paces the looks at each RedisLock's Redis and the showing of what
// they saw, as the Pacing rules above say. Its zero value is ready; it is
// safe for concurrent use. It relies on the reconciles of one RedisLock
// running one at a time (the work queue sees to it): what one look holds,
// the next one resumes.
type pacer struct {
	mu    sync.Mutex
	locks map[types.NamespacedName]*pace
}

// pace is what the pacer knows of one RedisLock.
type pace struct {
	looks, shows turns
	// held is what the looks saw since the last change shown, not shown
	// yet; nil when nothing waits.
	held *heldLook
}

// heldLook is the status a look saw but could not show yet, on the
// object's resourceVersion then: a status written since (a spec the user
// changed, or another writer) makes it stale, and the next look starts
// from what is shown.
type heldLook struct {
	resourceVersion string
	status          *v1alpha1.RedisLockStatus
	// changes is the holder changes seen since the last shown, and
	// since when.
	changes int
	since   time.Time
}

// flapping is how the holder changed since the last change shown: how
// many times, and over how long (from the first change to now).
type flapping struct {
	changes int
	over    time.Duration
}

func (p *pacer) of(key types.NamespacedName) *pace {
	if p.locks == nil {
		p.locks = map[types.NamespacedName]*pace{}
	}
	lp := p.locks[key]
	if lp == nil {
		lp = &pace{}
		p.locks[key] = lp
	}
	return lp
}

// look takes a turn to look at the lock of rl now, and returns 0; or, when
// the lock has had its looks for now, returns how long until its next
// turn, and takes none. renewInterval is the lock's.
func (p *pacer) look(rl *v1alpha1.RedisLock, renewInterval time.Duration, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	lp := p.of(keyOf(rl))
	every := renewInterval / looksPerRenewInterval
	if wait := lp.looks.wait(now, every, lookBurst); wait > 0 {
		return wait
	}
	lp.looks.take(now, every)
	return 0
}

// resume puts into rl's status what the lock's last looks saw and could
// not show yet, if anything, so that this look continues from there:
// applyHolder counts the holder changes since the last look, not since
// the last shown.
func (p *pacer) resume(rl *v1alpha1.RedisLock) {
	p.mu.Lock()
	defer p.mu.Unlock()
	lp := p.of(keyOf(rl))
	if lp.held != nil && lp.held.resourceVersion != rl.ResourceVersion {
		lp.held = nil
	}
	if lp.held != nil {
		copyObserved(&rl.Status, lp.held.status)
	}
}

// show decides, after a look, whether rl's status, as the look left it,
// is shown now. shown is the status as read, which the look started from
// (with this reconcile's other changes); holderChanged says whether the
// look saw a new holder. When nothing changed, or the lock has a turn to
// show it now (which show takes), it returns 0 and the holder changes
// since the last shown. Otherwise it keeps what the look saw, puts the
// shown status back into rl, and returns how long until the turn.
func (p *pacer) show(rl *v1alpha1.RedisLock, shown *v1alpha1.RedisLockStatus, holderChanged bool, renewInterval time.Duration, now time.Time) (time.Duration, flapping) {
	p.mu.Lock()
	defer p.mu.Unlock()
	lp := p.of(keyOf(rl))
	held := lp.held
	if held == nil {
		held = &heldLook{since: now}
	}
	if holderChanged {
		if held.changes == 0 {
			held.since = now
		}
		held.changes++
	}
	if equality.Semantic.DeepEqual(shown, &rl.Status) {
		lp.held = nil
		return 0, flapping{}
	}
	if wait := lp.shows.wait(now, renewInterval, showBurst); wait > 0 {
		held.resourceVersion, held.status = rl.ResourceVersion, rl.Status.DeepCopy()
		lp.held = held
		copyObserved(&rl.Status, shown)
		return wait, flapping{}
	}
	lp.shows.take(now, renewInterval)
	lp.held = nil
	return 0, flapping{changes: held.changes, over: now.Sub(held.since)}
}

// forget drops what is known of the RedisLock at key, once it is gone.
func (p *pacer) forget(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.locks, key)
}

func keyOf(rl *v1alpha1.RedisLock) types.NamespacedName {
	return types.NamespacedName{Namespace: rl.Namespace, Name: rl.Name}
}

// copyObserved copies into dst the fields of src that a look at Redis sets
// (observe): the holder, its acquire time and fencing token, the
// transitions, the nodes and the conditions.
func copyObserved(dst, src *v1alpha1.RedisLockStatus) {
	dst.HolderIdentity, dst.AcquireTime, dst.LeaderTransitions, dst.FencingToken = src.HolderIdentity, src.AcquireTime.DeepCopy(), src.LeaderTransitions, src.FencingToken
	dst.Nodes, dst.Conditions = slices.Clone(src.Nodes), slices.Clone(src.Conditions)
}

// turns is a generic cell rate algorithm: at most burst turns at once, then
// one per interval. Its zero value has every turn free.
type turns struct {
	// next is the theoretical time of the next turn: when it would be
	// taken, were every turn taken one interval after the last.
	next time.Time
}

// wait returns how long from now until a turn is free: 0 when one is.
func (t *turns) wait(now time.Time, interval time.Duration, burst int) time.Duration {
	if !t.next.After(now) {
		return 0
	}
	return max(0, t.next.Sub(now)-time.Duration(burst-1)*interval)
}

// take takes a turn at now, which wait said is free.
func (t *turns) take(now time.Time, interval time.Duration) {
	if t.next.Before(now) {
		t.next = now
	}
	t.next = t.next.Add(interval)
}
