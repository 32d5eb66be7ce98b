package redislock

// Checks of how the nodes are set up: what the lock relies on and cannot
// enforce by itself.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// CheckIndependent asks every node for its server's run_id (INFO server)
// and returns an error wrapping ErrInvalidOptions, naming the nodes, when
// two of them reach the same server: two addresses of one host, or a name
// and its IP. Redlock counts each node once in its quorum, so one server
// counted twice could grant a "majority" alone. Nodes that do not answer
// are not judged; with one node there is nothing to check.
func (c *Client) CheckIndependent(ctx context.Context) error {
	if len(c.nodes) < 2 {
		return nil
	}
	seen := map[string]string{} // run_id -> first node with it
	var dup []string
	for i, info := range c.infoEach(ctx, "server") {
		id := infoField(info, "run_id")
		if id == "" {
			continue
		}
		if first, ok := seen[id]; ok {
			dup = append(dup, fmt.Sprintf("%s and %s", first, c.nodes[i].name))
			continue
		}
		seen[id] = c.nodes[i].name
	}
	if len(dup) > 0 {
		return fmt.Errorf("%w: Redlock nodes must be independent servers, but %s reach the same server (run_id): each would count twice in the quorum", ErrInvalidOptions, strings.Join(dup, "; "))
	}
	return nil
}

// infoEach asks every node for one INFO section at once, each bounded by
// NodeTimeout, and returns the replies indexed like c.nodes: "" for a node
// that did not answer.
func (c *Client) infoEach(ctx context.Context, section string) []string {
	ctx, cancel := context.WithTimeout(ctx, c.opts.NodeTimeout)
	defer cancel()
	infos := make([]string, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Go(func() { infos[i], _ = n.client.Info(ctx, section).Result() })
	}
	wg.Wait()
	return infos
}

// infoField returns the value of field in the text of an INFO reply.
func infoField(info, field string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// ErrEvictionPolicy is wrapped by CheckEviction's error for nodes whose
// maxmemory policy can evict lock keys.
var ErrEvictionPolicy = errors.New("redislock: eviction policy")

// CheckEviction asks every node for its maxmemory and maxmemory-policy
// (INFO memory) and returns an error wrapping ErrEvictionPolicy, naming
// the nodes and their policy, when a node has a memory limit and a policy
// that can evict the lock's keys. Under a volatile-* policy Redis may evict
// a lock key (it has a ttl): the holder then loses the lock at its next
// renewal and the lock is granted again only once the holder's time is up,
// so S1 holds but leadership changes for no reason; it may evict a fencing
// counter too (it expires after a long idle time), which then starts again
// from that node's clock, as after a restart: above every earlier token on
// one node, but in Redlock mode only if no node's clock ran ahead of the
// others' by more than the time since (fence.lua raises every counter to the
// fastest node's), so S3 across nodes is then bound by their clock skew.
// Under an allkeys-*
// policy Redis may also evict the fencing counter and the validity key, and
// with them the protection against a vanished key: run such nodes with
// noeviction, or give the locks a Redis of their own. Nodes that do not
// answer are not judged.
func (c *Client) CheckEviction(ctx context.Context) error {
	var risky []string
	for i, info := range c.infoEach(ctx, "memory") {
		policy := infoField(info, "maxmemory_policy")
		if infoField(info, "maxmemory") == "0" || policy == "" || policy == "noeviction" {
			continue
		}
		risky = append(risky, fmt.Sprintf("%s (maxmemory %s, maxmemory-policy %s)", c.nodes[i].name, infoField(info, "maxmemory_human"), policy))
	}
	if len(risky) > 0 {
		return fmt.Errorf("%w: %s can evict lock keys under memory pressure: the holder then loses the lock for no fault of its own (volatile-*), or the keys that keep S1 and S3 after an eviction are evicted too (allkeys-*); use maxmemory-policy noeviction", ErrEvictionPolicy, strings.Join(risky, ", "))
	}
	return nil
}
