package demo

import (
	"bytes"
	"context"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The test binary stands in for the redislock binary: the demo starts its
// candidates as "<self> candidate ...".
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "candidate" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		if err := Candidate(ctx, os.Args[2:], os.Stdout); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestDemoElectsAndHandsOver(t *testing.T) {
	var out syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := Run(ctx, []string{"-ttl", "1s"}, &out); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	got := out.String()
	leaders := regexp.MustCompile(`LEADER (candidate-\d) \(fence (\d+)\)`).FindAllStringSubmatch(got, -1)
	if len(leaders) != 3 || leaders[0][1] == leaders[1][1] || leaders[1][1] == leaders[2][1] || leaders[0][2] != "1" || leaders[2][2] != "3" {
		t.Fatalf("want three leaders in turn with fences 1..3, got %q in:\n%s", leaders, got)
	}
	if !strings.Contains(got, "summary: failover after a crash") {
		t.Fatalf("no summary in:\n%s", got)
	}
}

// syncBuffer is a bytes.Buffer safe for the demo's concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
