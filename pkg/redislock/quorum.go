package redislock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// reply is one node's answer to one call.
type reply struct {
	val any
	err error
}

// nodeCall runs one script on one node.
type nodeCall func(ctx context.Context, n *node) (any, error)

// each runs call on the nodes whose index is in only (every node when only
// is nil), all at once, and returns their replies indexed like c.nodes. A
// node that has not answered within NodeTimeout gets an error wrapping
// context.DeadlineExceeded: each never waits longer, whatever the node
// client's own timeouts are. Nodes not in only get a nil reply.
func (c *Client) each(ctx context.Context, only []int, call nodeCall) []reply {
	ctx, cancel := context.WithTimeout(ctx, c.opts.NodeTimeout)
	defer cancel()
	replies := make([]reply, len(c.nodes))
	type indexed struct {
		i int
		reply
	}
	done := make(chan indexed, len(c.nodes))
	pending := 0
	forEach(len(c.nodes), only, func(i int) {
		pending++
		go func() { done <- indexed{i, c.call(ctx, i, call)} }()
	})
	for ; pending > 0; pending-- {
		select {
		case r := <-done:
			replies[r.i] = r.reply
		case <-ctx.Done():
			// Late answers land in the buffered channel and are dropped.
			for ; pending > 0; pending-- {
				select {
				case r := <-done:
					replies[r.i] = r.reply
				default:
				}
			}
			forEach(len(c.nodes), only, func(i int) {
				if replies[i].val == nil && replies[i].err == nil {
					replies[i].err = fmt.Errorf("%s: no answer within %v: %w", c.nodes[i].name, c.opts.NodeTimeout, ctx.Err())
				}
			})
			return replies
		}
	}
	return replies
}

// call runs call on node i and names the node in its error.
func (c *Client) call(ctx context.Context, i int, call nodeCall) reply {
	v, err := call(ctx, &c.nodes[i])
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return reply{err: fmt.Errorf("%s: no answer within %v: %w", c.nodes[i].name, c.opts.NodeTimeout, err)}
		}
		return reply{err: fmt.Errorf("%s: %w", c.nodes[i].name, err)}
	}
	return reply{val: v}
}

// forEach calls f with every index below n that is in only, or with every
// index below n when only is nil.
func forEach(n int, only []int, f func(i int)) {
	if only == nil {
		for i := 0; i < n; i++ {
			f(i)
		}
		return
	}
	for _, i := range only {
		f(i)
	}
}

// nodeErrors joins the errors of replies under sentinel.
func nodeErrors(sentinel error, replies []reply) error {
	var errs []error
	for _, r := range replies {
		if r.err != nil {
			errs = append(errs, r.err)
		}
	}
	if len(errs) == 0 {
		return sentinel
	}
	return fmt.Errorf("%w: %w", sentinel, errors.Join(errs...))
}

// drift is the allowance for clock drift between this process and the
// nodes over a ttl: 1% of it plus 2ms, as Redlock prescribes.
func drift(ttl time.Duration) time.Duration {
	return ttl/100 + 2*time.Millisecond
}
