package demo

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redislock/redislock/internal/testing/redisstats"
	"github.com/redislock/redislock/internal/testing/rung"
	"github.com/redislock/redislock/internal/testing/syncbuf"
	"github.com/redislock/redislock/internal/testing/testenv"
)

// The demo, as `make demo` runs it (in log mode): both leaders appear, the
// two handovers are measured, and no process it started outlives it.
func TestDemoRunsTheWholeSystemAndCleansUp(t *testing.T) {
	rung.NeedServers(t)
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	assets, err := testenv.AssetsDir(root)
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	for out, pkg := range map[string]string{"redislock": ".", "sampleoperator": "./test/e2e/sampleoperator"} {
		build := exec.Command("go", "build", "-o", filepath.Join(bin, out), pkg)
		build.Dir = root
		if b, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	var out syncbuf.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const ttl = 2 * time.Second
	res, err := Run(ctx, Config{
		Root: root, Redislock: filepath.Join(bin, "redislock"), SampleOperator: filepath.Join(bin, "sampleoperator"),
		Assets: assets, Redlock: true, TTL: ttl, Out: &out,
	})
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	got := out.String()
	t.Logf("demo output:\n%s", got)
	for _, want := range []string{
		"kubectl apply -k config/crd: RedisLock CRD installed",
		"the webhook injected the sidecar \"redislock-agent\"",
		"-lock=worker",
		" LEADER",
		"killed",
		"failover took",
		"handover took",
		"counting each Redis node's commands for 10s",
		"REDIS NODE       SCRIPTS/s  PUBLISH/s  ALL COMMANDS/s",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the account lacks %q", want)
		}
	}
	// A crash is noticed when the key expires: about a ttl, never before a
	// renew deadline has passed nor much after a ttl.
	if res.Failover < ttl/2 || res.Failover > ttl+2*time.Second {
		t.Errorf("failover %v, want about the ttl %v", res.Failover, ttl)
	}
	if res.Handover > time.Second {
		t.Errorf("handover %v, want well under the ttl", res.Handover)
	}
	// FENCE is status.fencingToken, the latest token handed out for the
	// lock: on Redlock, an observer may read it while an acquisition is
	// still raising the nodes' counters to the new token, so it may rise
	// during a term (the demo's lock is a Redlock). With every node
	// answering, as in the demo, it never falls: not within a term, nor
	// from one holder to the next (S3).
	fences := map[string]int64{} // the last FENCE of each lock and holder
	last := map[string]int64{}   // the last FENCE of each lock
	for line := range strings.Lines(got) {
		f := strings.Fields(line)
		if len(f) < 3 || !strings.HasPrefix(f[0], namespace+"/") || f[1] == "-" {
			continue
		}
		fence, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			t.Errorf("%s: FENCE %q is no number", f[0], f[2])
			continue
		}
		if fence < last[f[0]] {
			t.Errorf("%s: FENCE %d after %d (holder %s); want it never to fall", f[0], fence, last[f[0]], f[1])
		}
		last[f[0]] = fence
		fences[f[0]+" "+f[1]] = fence
	}
	if len(fences) < 4 {
		t.Errorf("the tables show %d holders, want 4 (two on each lock): %v", len(fences), fences)
	}
	// The steady state after the scenario costs each node about a renewal
	// per renewInterval from each of the two leaders, an attempt per ttl
	// from each of the two standbys and the controller's reads, about one
	// per lock per ttl; a loop that wakes itself costs thousands a second.
	perLock := float64(redisstats.Budget(rateWindow, ttl, ttl*2/15, 1, 0)) + 3*rateWindow.Seconds()/ttl.Seconds()
	if len(res.Rates) != 3 {
		t.Errorf("%d command rates, want one per Redis node (3)", len(res.Rates))
	}
	for _, r := range res.Rates {
		if limit := 2 * perLock / rateWindow.Seconds(); r.Scripts > limit {
			t.Errorf("%s: %.1f scripts/s in the steady state, want at most %.1f", r.Addr, r.Scripts, limit)
		}
		if r.Publish > 0.5 {
			t.Errorf("%s: %.1f PUBLISH/s with stable holders, want none", r.Addr, r.Publish)
		}
	}
	if len(res.PIDs) != 7 {
		t.Errorf("%d processes started, want 7 (controller, 3 operators, 3 agents)", len(res.PIDs))
	}
	for _, pid := range res.PIDs {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d outlived the demo (kill 0: %v)", pid, err)
		}
	}
}
