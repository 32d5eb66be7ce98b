package proc

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// sh starts /bin/sh -c script, with its output in the test's directory,
// and kills it when the test ends.
func sh(t *testing.T, script string, o Options) *Process {
	t.Helper()
	o.Name, o.Path, o.Args = "sh", "/bin/sh", []string{"-c", script}
	if o.Log == "" {
		o.Log = filepath.Join(t.TempDir(), "sh.log")
	}
	p, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Kill(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// collect gathers lines from a callback.
type collect struct {
	mu    sync.Mutex
	lines []string
}

func (c *collect) add(line string) {
	c.mu.Lock()
	c.lines = append(c.lines, line)
	c.mu.Unlock()
}

func (c *collect) get() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.lines...)
}

// has is a WaitReady condition: some line has been seen.
func (c *collect) has(line string) func(context.Context) (bool, error) {
	return func(context.Context) (bool, error) {
		for _, l := range c.get() {
			if l == line {
				return true, nil
			}
		}
		return false, nil
	}
}

func exit(t *testing.T, p *Process) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return p.Wait(ctx)
}
