package redislock

import (
	"context"
	"fmt"
	"strings"
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
	ctx, cancel := context.WithTimeout(ctx, c.opts.NodeTimeout)
	defer cancel()
	seen := map[string]string{} // run_id -> first node with it
	var dup []string
	for _, n := range c.nodes {
		info, err := n.client.Info(ctx, "server").Result()
		if err != nil {
			continue
		}
		id := infoField(info, "run_id")
		if id == "" {
			continue
		}
		if first, ok := seen[id]; ok {
			dup = append(dup, fmt.Sprintf("%s and %s", first, n.name))
			continue
		}
		seen[id] = n.name
	}
	if len(dup) > 0 {
		return fmt.Errorf("%w: Redlock nodes must be independent servers, but %s reach the same server (run_id): each would count twice in the quorum", ErrInvalidOptions, strings.Join(dup, "; "))
	}
	return nil
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
