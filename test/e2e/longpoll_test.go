package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redislock/redislock/internal/leaderhttp"
	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
)

// An app that long-polls its agent's /leader learns of a handover without
// polling: a standby's GET /leader?wait=2m&after=<observedAt> answers
// once the leader hands over (SIGTERM), with the new holder. While Redis
// does not answer, a standby's /leader carries the error, so an outage
// does not look like a healthy standby, and /healthz stays up.
func TestLongPollAndHonestErrorsOfTheAgent(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{Password: "poll-pass"})
	startController(t, nil)
	ns := newNamespace(t)
	applyRedisLock(t, ns, "worker", s, "poll-pass", faultTiming)
	fl, ids, p := startAgents(t, ns, "worker", agentUser(t, ns))
	ttl := faultTiming.lease
	leader := p.waitLeader(t, "", 3*ttl+5*time.Second)
	standby := ids[0]
	if standby == leader {
		standby = ids[1]
	}
	url := "http://" + fl.proc(standby).addr + "/leader"
	// The standby may still be reading its RedisLock ("starting") when
	// the leader leads: wait for it to campaign.
	var now leaderhttp.Status
	waitUntil(t, 3*ttl+5*time.Second, "the standby to name the holder, with no error", func() bool {
		var err error
		now, _, err = leaderhttp.Get(context.Background(), url)
		return err == nil && now.Error != "starting"
	})
	if now.Holder != leader || now.Error != "" {
		t.Fatalf("standby %s: %+v; want holder %s and no error", standby, now, leader)
	}

	type polled struct {
		st   leaderhttp.Status
		code int
		err  error
		at   time.Time
	}
	answered := make(chan polled, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		st, code, err := leaderhttp.Get(ctx, url+"?wait=2m&after="+now.ObservedAt.Format(time.RFC3339Nano))
		answered <- polled{st, code, err, time.Now()}
	}()
	// Long enough for the poll to be waiting at the agent; an early
	// answer fails the test below, since nothing changed before the
	// SIGTERM.
	pause(time.Second)
	select {
	case got := <-answered:
		t.Fatalf("the long poll answered before any change: %+v", got)
	default:
	}
	term := time.Now()
	fl.signal(leader, syscall.SIGTERM)
	var got polled
	select {
	case got = <-answered:
	case <-time.After(20 * time.Second):
		t.Fatal("the long poll did not answer within 20s of the handover")
	}
	if got.err != nil || got.st.Holder == leader || got.st.Holder == "" {
		t.Fatalf("the long poll answered %d %+v %v; want the new holder", got.code, got.st, got.err)
	}
	t.Logf("the long poll of %s answered %v after %s's SIGTERM: holder %s, leading %v", standby, got.at.Sub(term).Round(time.Millisecond), leader, got.st.Holder, got.st.Leading)

	// Redis stops answering: a standby says why.
	newLeader := p.waitLeader(t, leader, ttl+5*time.Second)
	other := ""
	for _, id := range ids {
		if id != leader && id != newLeader {
			other = id
		}
	}
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Resume() }()
	var st leaderhttp.Status
	waitUntil(t, 4*ttl+10*time.Second, other+"'s /leader to carry the Redis error", func() bool {
		var err error
		st, _, err = leaderhttp.Get(context.Background(), "http://"+fl.proc(other).addr+"/leader")
		return err == nil && strings.Contains(st.Error, "no quorum")
	})
	resp, err := http.Get("http://" + fl.proc(other).addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz %d while Redis is paused; want 200: the agent works", resp.StatusCode)
	}
	t.Logf("%s's /leader with Redis paused: %s", other, st.Error)
	// The failed attempts are counted by reason.
	metrics, err := httpGetBody("http://" + fl.proc(other).addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(metrics, `redislock_acquire_duration_seconds_count{lock="`) || !strings.Contains(metrics, `result="no_quorum"} `) {
		t.Errorf("/metrics while Redis is paused has no count of acquire attempts with result no_quorum:\n%s", metrics)
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 4*ttl+10*time.Second, other+"'s error to clear once Redis answers", func() bool {
		st, _, err = leaderhttp.Get(context.Background(), "http://"+fl.proc(other).addr+"/leader")
		return err == nil && st.Error == ""
	})
}

// httpGetBody returns the body of GET url.
func httpGetBody(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// An agent's -hook runs on each change of leader, with the /leader JSON on
// its stdin, and not at every renewal: a handover runs the new leader's
// hook with leading true, and the old leader's last run says it stopped.
func TestAgentHookRunsOnEachChangeOfLeader(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{Password: "hook-pass"})
	startController(t, nil)
	ns := newNamespace(t)
	applyRedisLock(t, ns, "worker", s, "hook-pass", faultTiming)
	dir := t.TempDir()
	hook := filepath.Join(dir, "hook.sh")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\ncat >> "+dir+"/$POD_NAME.hook\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	fl, _, p := startAgents(t, ns, "worker", agentUser(t, ns), "-hook="+hook)
	ttl := faultTiming.lease
	runs := func(id string) []leaderhttp.Status {
		raw, _ := os.ReadFile(filepath.Join(dir, id+".hook"))
		var out []leaderhttp.Status
		for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
			var st leaderhttp.Status
			if json.Unmarshal([]byte(line), &st) == nil {
				out = append(out, st)
			}
		}
		return out
	}
	leader := p.waitLeader(t, "", 3*ttl+5*time.Second)
	waitUntil(t, 10*time.Second, leader+"'s hook to run with leading true", func() bool {
		r := runs(leader)
		return len(r) > 0 && r[len(r)-1].Leading
	})
	// Renewals every 300ms for 3s: no run of the hook.
	before := len(runs(leader))
	p.steady(t, 3*time.Second)
	if n := len(runs(leader)); n != before || n > 2 {
		t.Errorf("the leader's hook ran %d times, %d of them while it led steadily; want once or twice (seen as a standby, then leading) and none at renewals", n, n-before)
	}
	fl.signal(leader, syscall.SIGTERM)
	next := p.waitLeader(t, leader, ttl+5*time.Second)
	waitUntil(t, 10*time.Second, next+"'s hook to run with leading true", func() bool {
		r := runs(next)
		return len(r) > 0 && r[len(r)-1].Leading
	})
	if r := runs(leader); len(r) == 0 || r[len(r)-1].Leading {
		t.Errorf("the old leader's hook runs %+v; want the last to say it no longer leads", r)
	}
	t.Logf("hook runs: %s %d, %s %d", leader, len(runs(leader)), next, len(runs(next)))
}
