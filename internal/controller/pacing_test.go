package controller

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/redislock/redislock/api/v1alpha1"
)

func TestTurnsGiveABurstThenOnePerInterval(t *testing.T) {
	const interval = time.Second
	t0 := time.Unix(1000, 0)
	var tr turns
	for i := range 3 {
		if w := tr.wait(t0, interval, 3); w != 0 {
			t.Fatalf("turn %d of a burst of 3 waits %v; want none", i+1, w)
		}
		tr.take(t0, interval)
	}
	if w := tr.wait(t0, interval, 3); w != interval {
		t.Fatalf("a 4th turn at once waits %v; want %v", w, interval)
	}
	if w := tr.wait(t0.Add(interval), interval, 3); w != 0 {
		t.Fatalf("a turn an interval later waits %v; want none", w)
	}
	tr.take(t0.Add(interval), interval)
	// Quiet for three intervals: a whole burst again.
	quiet := t0.Add(5 * interval)
	for i := range 3 {
		if w := tr.wait(quiet, interval, 3); w != 0 {
			t.Fatalf("turn %d after a quiet time waits %v; want none", i+1, w)
		}
		tr.take(quiet, interval)
	}
	if w := tr.wait(quiet, interval, 3); w != interval {
		t.Fatalf("a 4th turn after the quiet time waits %v; want %v", w, interval)
	}
}

// look sets the holder a look at Redis saw, as applyHolder does, on rl
// whose status starts as shown (or as the held look left it, once
// resumed).
func look(p *pacer, rl *v1alpha1.RedisLock, holder string, now time.Time) (time.Duration, flapping) {
	shown := rl.Status.DeepCopy()
	p.resume(rl)
	changed := rl.Status.HolderIdentity != holder
	if changed {
		rl.Status.HolderIdentity, rl.Status.AcquireTime = holder, &metav1.Time{Time: now}
		rl.Status.LeaderTransitions++
	}
	return p.show(rl, shown, changed, time.Second, now)
}

// The first changes after a quiet time are shown at once; the rest of a
// burst waits for the lock's next turn, with the status as shown, and is
// shown then, what it saw counted, as one change.
func TestPacerShowsTheFirstChangesAtOnceAndABurstAtTheNextTurn(t *testing.T) {
	const renewInterval = time.Second
	t0 := time.Unix(1000, 0)
	var p pacer
	rl := &v1alpha1.RedisLock{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lock", ResourceVersion: "1"}}
	for i, holder := range []string{"a", "", "b"} {
		if wait, flap := look(&p, rl, holder, t0); wait != 0 || flap.changes != 1 {
			t.Fatalf("change %d after a quiet time: waits %v, %d changes; want shown at once, as one", i+1, wait, flap.changes)
		}
	}
	if wait, _ := look(&p, rl, "b", t0); wait != 0 {
		t.Fatalf("a look that saw nothing new waits %v; want nothing to wait for", wait)
	}
	wait, _ := look(&p, rl, "c", t0.Add(renewInterval/4))
	if wait != renewInterval*3/4 || rl.Status.HolderIdentity != "b" || rl.Status.LeaderTransitions != 3 {
		t.Fatalf("a 4th change at once: waits %v, status shows %q after %d transitions; want to wait %v with b shown, after 3",
			wait, rl.Status.HolderIdentity, rl.Status.LeaderTransitions, renewInterval*3/4)
	}
	if wait, _ := look(&p, rl, "d", t0.Add(renewInterval/2)); wait != renewInterval/2 || rl.Status.HolderIdentity != "b" {
		t.Fatalf("a 5th change before the turn waits %v with %q shown; want %v with b", wait, rl.Status.HolderIdentity, renewInterval/2)
	}
	wait, flap := look(&p, rl, "e", t0.Add(renewInterval))
	if wait != 0 || rl.Status.HolderIdentity != "e" || rl.Status.LeaderTransitions != 6 || flap.changes != 3 || flap.over != renewInterval*3/4 {
		t.Fatalf("at the turn: waits %v, shows %q after %d transitions, %+v; want e shown at once after 6, as 3 changes over %v",
			wait, rl.Status.HolderIdentity, rl.Status.LeaderTransitions, flap, renewInterval*3/4)
	}
	if got := rl.Status.AcquireTime.Time; !got.Equal(t0.Add(renewInterval)) {
		t.Fatalf("acquireTime %v; want when e was seen", got)
	}
}

// What a look saw and could not show is for the object as it was then: a
// status written since (a spec the user changed, say) starts the next look
// from what is shown.
func TestPacerDropsAHeldLookWhenTheObjectChanged(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var p pacer
	rl := &v1alpha1.RedisLock{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lock", ResourceVersion: "1"}}
	for _, holder := range []string{"a", "b", "c"} {
		look(&p, rl, holder, t0)
	}
	if wait, _ := look(&p, rl, "d", t0); wait == 0 {
		t.Fatal("a 4th change at once was shown; want it held")
	}
	rl.ResourceVersion = "2"
	p.resume(rl)
	if rl.Status.HolderIdentity != "c" {
		t.Fatalf("resumed %q on a newer object; want c, as shown", rl.Status.HolderIdentity)
	}
	rl.ResourceVersion = "1"
	p.resume(rl)
	if rl.Status.HolderIdentity != "c" {
		t.Fatalf("resumed %q after the held look was dropped; want c", rl.Status.HolderIdentity)
	}
}
