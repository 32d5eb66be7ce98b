package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/redislock/redislock/internal/leaderhttp"
)

// hookKey is what a change is for the hook: leadership and the holder,
// not the times and deadlines every renewal moves.
type hookKey struct {
	leading bool
	holder  string
	shards  string // a sharded lock's shards and tokens (shardsKey)
}

func keyOf(st leaderhttp.Status) hookKey { return hookKey{st.Leading, st.Holder, shardsKey(st)} }

// runHooks runs Options.Hook once for each change of leadership or holder,
// with the status as JSON on its stdin and REDISLOCK_LEADING=true or
// false in its environment, one run at a time: changes that come while it
// runs are folded into one run with the latest status. Each run is bounded
// by the lock's ttl, and not cut short when ctx ends; then a last run,
// bounded by finalWriteTimeout, reports the final status. A failed run is
// logged; there is no retry, since the next change runs it again.
func (a *Agent) runHooks(ctx context.Context, changed <-chan struct{}, ttl time.Duration) {
	var last *hookKey
	run := func(hctx context.Context) {
		seen := a.hooks.begin()
		defer a.hooks.end(seen)
		st := a.status()
		k := keyOf(st)
		if last != nil && *last == k {
			return
		}
		last = &k
		in, err := json.Marshal(st)
		if err != nil {
			a.o.Logger.Error(err, "hook: encode the status")
			return
		}
		cmd := exec.CommandContext(hctx, a.o.Hook)
		cmd.Stdin = bytes.NewReader(append(in, '\n'))
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		cmd.Env = append(os.Environ(), "REDISLOCK_LEADING="+strconv.FormatBool(st.Leading))
		if err := cmd.Run(); err != nil {
			a.o.Logger.Error(err, "hook failed", "hook", a.o.Hook, "leading", st.Leading)
		}
	}
	for {
		select {
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalWriteTimeout)
			run(final)
			cancel()
			return
		case <-changed:
			// Not cut short when the agent stops: the last run, above,
			// comes after it and must not be taken for done by a run
			// killed halfway.
			hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ttl)
			run(hctx)
			cancel()
		}
	}
}
