package proc

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestWaitReady(t *testing.T) {
	t.Run("returns once the condition holds", func(t *testing.T) {
		var out collect
		p := sh(t, `sleep 0.2; echo up; exec sleep 30`, Options{Stdout: out.add})
		if err := p.WaitReady(context.Background(), 10*time.Second, out.has("up")); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(out.get(), "up") {
			t.Error("WaitReady returned before the condition held")
		}
	})
	t.Run("fails at once when the process exits", func(t *testing.T) {
		p := sh(t, `echo cannot start >&2; exit 1`, Options{})
		start := time.Now()
		err := p.WaitReady(context.Background(), time.Minute, func(context.Context) (bool, error) { return false, nil })
		if !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "cannot start") {
			t.Fatalf("WaitReady: %v, want ErrExited with the log's end", err)
		}
		if took := time.Since(start); took > 30*time.Second {
			t.Errorf("WaitReady took %v, want it to notice the exit, not wait out the timeout", took)
		}
	})
	t.Run("fails after the timeout and leaves the process running", func(t *testing.T) {
		p := sh(t, `exec sleep 30`, Options{})
		err := p.WaitReady(context.Background(), 100*time.Millisecond, func(context.Context) (bool, error) { return false, nil })
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("WaitReady: %v, want the deadline", err)
		}
		if p.Exited() {
			t.Error("WaitReady stopped the process")
		}
	})
	t.Run("fails with the condition's error", func(t *testing.T) {
		p := sh(t, `exec sleep 30`, Options{})
		boom := errors.New("boom")
		if err := p.WaitReady(context.Background(), time.Minute, func(context.Context) (bool, error) { return false, boom }); !errors.Is(err, boom) {
			t.Fatalf("WaitReady: %v, want %v", err, boom)
		}
	})
}
