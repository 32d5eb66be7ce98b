package promlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/redislock/redislock/internal/testing/redisproc"
	"github.com/redislock/redislock/internal/testing/redistest"
	"github.com/redislock/redislock/pkg/promlock"
	"github.com/redislock/redislock/pkg/redislock"
)

func TestMetricsFollowLockCalls(t *testing.T) {
	s := redistest.Start(t, redisproc.Options{})
	reg := prometheus.NewRegistry()
	m, err := promlock.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := redislock.New(redistest.Clients(t, s), &redislock.Options{AssumeDurable: true, Identity: "a", Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l, err := c.Obtain(ctx, "m", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Obtain(ctx, "m", 10*time.Second); !errors.Is(err, redislock.ErrNotObtained) {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := c.ObtainWait(short, "m", 10*time.Second, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	s.Kill()
	if err := l.Refresh(ctx); !errors.Is(err, redislock.ErrNoQuorum) {
		t.Fatal(err)
	}
	got, err := testutil.GatherAndCount(reg, "redislock_acquire_duration_seconds", "redislock_renew_duration_seconds", "redislock_wait_duration_seconds")
	if err != nil {
		t.Fatal(err)
	}
	// Series: acquire{ok}, acquire{not_obtained}, renew{no_quorum},
	// wait{not_obtained}.
	if got != 4 {
		t.Fatalf("%d series, want 4", got)
	}
	if _, err := promlock.New(reg); err == nil {
		t.Fatal("registering twice succeeded")
	}
}

func TestResult(t *testing.T) {
	for err, want := range map[error]string{
		nil:                         "ok",
		redislock.ErrNotObtained:    "not_obtained",
		redislock.ErrNoQuorum:       "no_quorum",
		redislock.ErrLockLost:       "lost",
		redislock.ErrInvalidOptions: "invalid",
		errors.New("x"):             "error",
	} {
		if got := promlock.Result(err); got != want {
			t.Errorf("Result(%v) = %q, want %q", err, got, want)
		}
	}
}
