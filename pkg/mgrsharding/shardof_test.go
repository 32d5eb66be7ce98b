package mgrsharding_test

import (
	"testing"

	"github.com/redislock/redislock/pkg/mgrsharding"
)

// ShardOf is FNV-1a of "namespace/name": these values, computed apart
// from Go (Python), pin it, so that a replica of another version or
// language maps an object to the same shard.
func TestShardOfIsFNV1aOfNamespaceSlashName(t *testing.T) {
	for _, tc := range []struct {
		ns, name string
		shards   int
		want     int
	}{
		{"default", "a", 64, 38},
		{"prod", "orders-7", 64, 0},
		{"", "node-1", 256, 252},
		{"kube-system", "coredns", 3, 1},
	} {
		if got := mgrsharding.ShardOf(tc.ns, tc.name, tc.shards); got != tc.want {
			t.Errorf("ShardOf(%q, %q, %d) = %d; want %d", tc.ns, tc.name, tc.shards, got, tc.want)
		}
	}
}
