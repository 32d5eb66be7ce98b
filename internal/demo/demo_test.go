package demo

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redislock/redislock/internal/testenv"
)

// The demo, as `make demo` runs it (in log mode): both leaders appear, the
// two handovers are measured, and no process it started outlives it.
func TestDemoRunsTheWholeSystemAndCleansUp(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
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
	var out syncBuffer
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
	if len(res.PIDs) != 7 {
		t.Errorf("%d processes started, want 7 (controller, 3 operators, 3 agents)", len(res.PIDs))
	}
	for _, pid := range res.PIDs {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d outlived the demo (kill 0: %v)", pid, err)
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
