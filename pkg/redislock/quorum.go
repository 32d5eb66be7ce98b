package redislock

import (
	"context"
	"errors"
	"fmt"
)

// reply is one node's answer to one call.
type reply struct {
	val any
	err error
}

// each runs one script call on the nodes whose index is in idx (c.all for
// every node), all at once, and returns their replies indexed like c.nodes;
// nodes not in idx get a zero reply. A node that has not
// answered within NodeTimeout gets an error wrapping
// context.DeadlineExceeded: each never waits longer, whatever the node
// client's own timeouts are. The last node runs on the caller's goroutine
// when its client honours context deadlines; the others, or all when it
// does not, run on goroutines of their own.
//
// The slice comes from a pool: callers hand buf back with c.done once they
// no longer read the replies.
func (c *Client) each(ctx context.Context, idx []int, s *script, keysAndArgs ...any) (replies []reply, buf *replyBuf) {
	buf = c.replies.Get().(*replyBuf)
	buf.args = s.appendArgs(buf.args, keysAndArgs...)
	replies, buf.late = c.fill(ctx, idx, s, buf.args, buf.r)
	return replies, buf
}

// replyBuf holds a reusable replies slice, len(c.nodes) long, and the
// arguments of the calls.
type replyBuf struct {
	r    []reply
	args []any
	// late says calls may still be under way (fill gave up waiting), and
	// may still read args: the buffer is then not reused.
	late bool
}

// done returns buf, from each, to the pool.
func (c *Client) done(buf *replyBuf) {
	if buf.late {
		return
	}
	clear(buf.r) // drop references to replies and errors
	clear(buf.args)
	c.replies.Put(buf)
}

// fill runs the calls of each into replies. late says it stopped waiting
// for calls still under way.
func (c *Client) fill(ctx context.Context, idx []int, s *script, args []any, replies []reply) (_ []reply, late bool) {
	if len(idx) == 0 {
		return replies, false
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.NodeTimeout)
	defer cancel()
	last := idx[len(idx)-1]
	inline := c.nodes[last].bounded
	spawn := idx
	if inline {
		spawn = idx[:len(idx)-1]
	}
	var done chan indexed
	if len(spawn) > 0 {
		done = make(chan indexed, len(spawn))
		for _, i := range spawn {
			go c.send(ctx, i, s, args, done)
		}
	}
	if inline {
		replies[last] = c.call(ctx, last, s, args)
	}
	for pending := len(spawn); pending > 0; pending-- {
		select {
		case r := <-done:
			replies[r.i] = r.reply
		case <-ctx.Done():
			// Late answers land in the buffered channel and are dropped.
			for _, i := range spawn {
				if replies[i].val == nil && replies[i].err == nil {
					replies[i].err = c.timeout(i, ctx.Err())
				}
			}
			return replies, true
		}
	}
	// An inline call that ended with ctx may have left its command queued
	// on the node's autopipeliner, holding args (node.process).
	return replies, inline && ctx.Err() != nil
}

type indexed struct {
	i int
	reply
}

// send runs s on node i and sends the reply to done.
func (c *Client) send(ctx context.Context, i int, s *script, args []any, done chan<- indexed) {
	done <- indexed{i, c.call(ctx, i, s, args)}
}

// call runs s on node i and names the node in its error.
func (c *Client) call(ctx context.Context, i int, s *script, args []any) reply {
	v, err := c.nodes[i].eval(ctx, s, args)
	switch {
	case err == nil:
		return reply{val: v}
	case errors.Is(err, context.DeadlineExceeded):
		return reply{err: c.timeout(i, err)}
	}
	return reply{err: fmt.Errorf("%s: %w", c.nodes[i].name, err)}
}

func (c *Client) timeout(i int, err error) error {
	return fmt.Errorf("%s: no answer within %v: %w", c.nodes[i].name, c.opts.NodeTimeout, err)
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
