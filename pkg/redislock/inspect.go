package redislock

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Holder is what Inspect saw of a lock.
type Holder struct {
	// Identity names the holder on a majority of nodes; "" when no value
	// holds a majority: the lock is free, or split among candidates none
	// of whom leads.
	Identity string
	// NoExpiry reports that the holder's keys do not expire (someone ran
	// PERSIST, or wrote the key by hand): the lock will never free itself
	// if its holder dies. FreeIn is then the largest duration.
	NoExpiry bool
	// Fence is the holder's fencing token while the lock is held (the
	// greatest counter of the nodes that hold its value; on Redlock more
	// than the token if holder repair restored the key on a node whose
	// counter attempts had run past it), and the latest token
	// handed out while it is free (the highest counter among the nodes that
	// answered). It changes only when the lock is granted: a failed
	// attempt takes its count back when it gives its keys back.
	Fence int64
	// FreeIn is how long until the holder's keys expire on enough nodes
	// for a majority to be free, if it does not renew; 0 when free.
	FreeIn time.Duration
	// Metadata is what the holder published with its lock
	// (ObtainOptions.Metadata), as stored beside its value; "" when free
	// or when it published none.
	Metadata string
	// Nodes says, for each node in order, whether it answered.
	Nodes []NodeState
}

// NodeState is one node's part in an Inspect.
type NodeState struct {
	// Name identifies the node ("node 0 (10.0.0.1:6379)").
	Name string
	// Err is why the node did not answer, nil when it did.
	Err error
}

// Inspect reads the state of the lock called name from every node, in one
// atomic script per node, without changing anything. It returns an error
// wrapping ErrNoQuorum when fewer than a majority of nodes answered, and
// one wrapping ErrMalformedValue when the holder's value is not ours; the
// Holder carries what was seen either way.
func (c *Client) Inspect(ctx context.Context, name string) (Holder, error) {
	h, _, err := c.inspect(ctx, name)
	return h, err
}

// inspect is Inspect, also returning the holder's raw value.
func (c *Client) inspect(ctx context.Context, name string) (Holder, string, error) {
	if err := checkName(name); err != nil {
		return Holder{}, "", err
	}
	keys := keysFor(c.opts.KeyPrefix, name)
	replies, buf := c.each(ctx, c.all, inspectScript, &keys.lock, &keys.fence, &keys.meta)
	defer c.done(buf)
	// A Cluster slot that migrates refuses (TRYAGAIN) a script whose keys
	// exist only in part: a lock without metadata has no metadata key.
	// Ask those nodes again without it; the holder then shows none.
	var again []int
	for i, r := range replies {
		if r.err != nil && redis.HasErrorPrefix(r.err, "TRYAGAIN") {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		bare, bareBuf := c.each(ctx, again, inspectScript.bare, &keys.lock, &keys.fence)
		for _, i := range again {
			replies[i] = bare[i]
		}
		defer c.done(bareBuf)
	}
	var (
		h       Holder
		holders []heldReply
		ok      int
	)
	for i, r := range replies {
		err := r.err
		if err == nil {
			var hr heldReply
			var counter int64
			hr, counter, err = parseInspect(r.val)
			if err == nil {
				ok++
				h.Fence = max(h.Fence, counter)
				if hr.value != "" {
					holders = append(holders, hr)
				}
			}
		}
		if err != nil && r.err == nil {
			err = fmt.Errorf("%s: %w", c.nodes[i].name, err)
		}
		h.Nodes = append(h.Nodes, NodeState{Name: c.nodes[i].name, Err: err})
	}
	if ok < c.quorum {
		return h, "", fmt.Errorf("inspect %q: %d of %d nodes answered: %w", name, ok, len(c.nodes), nodeErrors(ErrNoQuorum, replies))
	}
	if len(holders) <= len(c.nodes)-c.quorum {
		return h, "", nil // a majority is free
	}
	seen, err := c.describeHolder(holders)
	if seen.split {
		return h, "", nil // no one holds a majority, so no one leads
	}
	h.Identity, h.FreeIn, h.NoExpiry = seen.identity, seen.free, seen.free == noExpiry
	for _, hr := range holders {
		if hr.value == seen.value && hr.meta != "" {
			h.Metadata = hr.meta
			break
		}
	}
	if seen.fence > 0 {
		h.Fence = seen.fence
	}
	if err != nil {
		return h, seen.value, fmt.Errorf("inspect %q: %w", name, err)
	}
	return h, seen.value, nil
}

// parseInspect decodes inspect.lua's reply.
func parseInspect(v any) (heldReply, int64, error) {
	a, ok := v.([]any)
	if !ok || len(a) != 4 {
		return heldReply{}, 0, fmt.Errorf("%w: inspect replied %T, want 4 elements", ErrMalformedValue, v)
	}
	hr, err := parseHeld(a[:3])
	hr.meta, _ = a[3].(string)
	return hr, hr.counter, err
}
