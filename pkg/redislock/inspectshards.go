package redislock

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// ShardHolder is what InspectShards saw of one shard.
type ShardHolder struct {
	// Identity names the shard's holder; "" while it is free.
	Identity string
	// Fence is the shard's fencing counter: the holder's token while it
	// is held, the last token handed out while it is free, 0 if it was
	// never granted.
	Fence int64
	// FreeIn is how long the holder's last grant or renewal is valid for
	// on the server, if it does not renew; 0 while free.
	FreeIn time.Duration
}

// ShardsView is what InspectShards saw of a sharded lock.
type ShardsView struct {
	// Shards holds each shard's holder, by index.
	Shards []ShardHolder
	// Members lists the identities of the live candidates, sorted (one
	// per candidate: two processes of one identity appear twice).
	Members []string
}

// Held returns how many shards have a holder.
func (v ShardsView) Held() int {
	n := 0
	for _, s := range v.Shards {
		if s.Identity != "" {
			n++
		}
	}
	return n
}

// InspectShards reads the holders and candidates of the sharded lock
// called name, of shards shards (see NewSharded), in one atomic script,
// without changing anything. It returns an error wrapping ErrNoQuorum when
// the node does not answer, one wrapping ErrMalformedValue when a value is
// not one this package writes, and one wrapping ErrInvalidOptions for a
// bad name or shard count, or a Client of several nodes.
func (c *Client) InspectShards(ctx context.Context, name string, shards int) (ShardsView, error) {
	if err := checkName(name); err != nil {
		return ShardsView{}, err
	}
	switch {
	case len(c.nodes) != 1:
		return ShardsView{}, fmt.Errorf("%w: a sharded lock runs on one node, not Redlock's %d", ErrInvalidOptions, len(c.nodes))
	case shards < 1 || shards > MaxShards:
		return ShardsView{}, fmt.Errorf("%w: shards %d is not from 1 to %d", ErrInvalidOptions, shards, MaxShards)
	}
	k := keysFor(c.opts.KeyPrefix, name)
	call, cancel := context.WithTimeout(ctx, c.opts.NodeTimeout)
	defer cancel()
	n := c.nodes[0]
	v, err := n.eval(call, inspectShardsScript, inspectShardsScript.appendArgs(nil, k.shards(), strconv.Itoa(shards)))
	if err != nil {
		return ShardsView{}, fmt.Errorf("%w: %s: %w", ErrNoQuorum, n.name, err)
	}
	return parseShardsView(v, shards)
}

// errShardsReply is the error of an inspection reply that
// inspectshards.lua does not give.
var errShardsReply = fmt.Errorf("%w: unexpected reply to a sharded lock's inspection", ErrNoQuorum)

// parseShardsView reads inspectshards.lua's reply.
func parseShardsView(v any, shards int) (ShardsView, error) {
	a, _ := v.([]any)
	bad := errShardsReply
	if len(a) < 1 {
		return ShardsView{}, bad
	}
	k, ok := a[0].(int64)
	if !ok || k < 0 || int64(len(a)) != 1+k+3*int64(shards) {
		return ShardsView{}, bad
	}
	var view ShardsView
	for _, m := range a[1 : 1+k] {
		s, ok := m.(string)
		if !ok {
			return ShardsView{}, bad
		}
		val, err := parseValue(s)
		if err != nil {
			return ShardsView{}, fmt.Errorf("a sharded lock's member: %w", err)
		}
		view.Members = append(view.Members, val.Identity)
	}
	slices.Sort(view.Members)
	for i := 1 + int(k); i < len(a); i += 3 {
		s, ok0 := a[i].(string)
		fence, ok1 := a[i+1].(int64)
		left, ok2 := a[i+2].(int64)
		if !ok0 || !ok1 || !ok2 || fence < 0 || left < 0 || (s == "") != (left == 0) {
			return ShardsView{}, bad
		}
		h := ShardHolder{Fence: fence, FreeIn: time.Duration(left) * time.Millisecond}
		if s != "" {
			val, err := parseValue(s)
			if err != nil {
				return ShardsView{}, fmt.Errorf("shard %d's holder: %w", len(view.Shards), err)
			}
			h.Identity = val.Identity
		}
		view.Shards = append(view.Shards, h)
	}
	return view, nil
}
