package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
)

// healthTiming is a ttl long enough to tell a step-down's release (the
// standby leads at once) from the key's expiry (a ttl later).
var healthTiming = durations{lease: 6 * time.Second, renew: 4 * time.Second, retry: 500 * time.Millisecond}

// TestAgentsLeadOnlyWhileTheirAppIsHealthy runs three agents gated on a
// file each (-health=file:, as the redislock.io/health annotation injects
// it): the leader whose app turns unhealthy steps down after
// -step-down-after and releases, so a healthy agent leads well before the
// ttl; an agent whose app is unhealthy never leads, and says why in
// /leader; and it leads once its app is healthy.
func TestAgentsLeadOnlyWhileTheirAppIsHealthy(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{Password: "agent-pass"})
	startController(t, nil)
	ns := newNamespace(t)
	applyRedisLock(t, ns, "worker", s, "agent-pass", healthTiming)
	kubeconfig := agentUser(t, ns)
	const stepDownAfter = time.Second
	ready := t.TempDir()
	readyFile := func(id string) string { return filepath.Join(ready, id) }
	setHealthy := func(id string, healthy bool) {
		t.Helper()
		if !healthy {
			if err := os.Remove(readyFile(id)); err != nil {
				t.Fatal(err)
			}
			return
		}
		if err := os.WriteFile(readyFile(id), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"worker-a", "worker-b", "worker-c"} {
		setHealthy(id, true)
	}
	fl, ids, p := startAgentsWith(t, ns, "worker", kubeconfig, func(id string) []string {
		return []string{"-health=file:" + readyFile(id), "-health-period=100ms", "-step-down-after=" + stepDownAfter.String()}
	})
	ttl := healthTiming.lease
	// The Redis just started: the restart guard grants the lock after it
	// has been up for a ttl.
	leader := p.waitLeader(t, "", 3*ttl+5*time.Second)

	// The leader's app turns unhealthy: it steps down and releases.
	unhealthy := time.Now()
	setHealthy(leader, false)
	old := leader
	leader = p.waitLeader(t, old, 2*ttl)
	took := p.firstLead(leader, unhealthy).Sub(unhealthy)
	t.Logf("%s unhealthy: %s leads after %v (step-down-after %v, ttl %v)", old, leader, took.Round(time.Millisecond), stepDownAfter, ttl)
	if took < stepDownAfter || took > ttl-time.Second {
		t.Errorf("%s led %v after %s turned unhealthy; want within [%v, %v]: not before -step-down-after, and by a release, not the key's expiry", leader, took, old, stepDownAfter, ttl-time.Second)
	}
	waitUnhealthyAnswer(t, p, old, unhealthy)

	// Every app but the leader's unhealthy; the leader exits (SIGTERM
	// releases). The others find the lock free and do not take it.
	for _, id := range ids {
		if id != leader && id != old {
			setHealthy(id, false)
		}
	}
	rest := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return id == leader })
	// Each has seen its app unhealthy (a check every 100ms) before the
	// leader leaves.
	for _, id := range rest {
		waitUnhealthyAnswer(t, p, id, unhealthy)
	}
	termed := time.Now()
	fl.signal(leader, syscall.SIGTERM)
	if err := fl.waitExit(leader, 10*time.Second); err != nil {
		t.Errorf("%s after SIGTERM: %v", leader, err)
	}
	for _, id := range rest {
		waitUnhealthyAnswer(t, p, id, termed)
	}
	healed := time.Now()
	if lead := p.leaders(); len(lead) != 0 {
		t.Fatalf("%v lead while their apps are unhealthy", lead)
	}
	setHealthy(rest[0], true)
	next := p.waitLeader(t, "", 2*ttl)
	if next != rest[0] {
		t.Errorf("%s leads; want %s, the one healthy app", next, rest[0])
	}
	for _, id := range rest {
		if at := p.firstLead(id, termed); !at.IsZero() && at.Before(healed) {
			t.Errorf("%s led at %v, while its app was unhealthy", id, at)
		}
	}
	p.stop()
	p.checkNoOverlap(t)
}

// waitUnhealthyAnswer waits for an answer of id, observed after since,
// that it does not lead, the lock free or another's, because its app is
// unhealthy.
func waitUnhealthyAnswer(t *testing.T, p *poller, id string, since time.Time) {
	t.Helper()
	waitUntil(t, 10*time.Second, id+" answering that its app is unhealthy", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		s, ok := p.last[id]
		return ok && !s.st.Leading && s.st.ObservedAt.After(since) && strings.Contains(s.st.Error, "the app is unhealthy")
	})
}
