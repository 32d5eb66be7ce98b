package proc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// ErrExited means a process exited while something waited for it.
var ErrExited = errors.New("proc: exited")

// readyInterval is how often WaitReady asks.
const readyInterval = 10 * time.Millisecond

// WaitReady asks ready every 10ms, first at once, until it reports true,
// and returns nil then. It returns an error with the end of the log when
// ready returns one, when the process exits (wrapping ErrExited) or when
// timeout passes or ctx ends first. It never stops the process.
func (p *Process) WaitReady(ctx context.Context, timeout time.Duration, ready func(context.Context) (bool, error)) error {
	err := wait.PollUntilContextTimeout(ctx, readyInterval, timeout, true, func(ctx context.Context) (bool, error) {
		if p.Exited() {
			return false, errors.Join(ErrExited, p.err) // p.err nil: it exited with status 0
		}
		return ready(ctx)
	})
	if err != nil {
		return fmt.Errorf("proc: waiting up to %v for %s to be ready: %w; the end of its log:\n%s", timeout, p.name, err, p.LogTail(2048))
	}
	return nil
}
