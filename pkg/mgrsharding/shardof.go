package mgrsharding

import "hash/fnv"

// ShardOf is the shard of the object namespace/name among shards: the
// 32-bit FNV-1a hash of "namespace/name" (a cluster-scoped object's
// namespace is "") modulo shards. It is stable across versions and
// processes, so any language can compute it.
func ShardOf(namespace, name string, shards int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(namespace)) // a hash's Write never fails
	_, _ = h.Write([]byte{'/'})
	_, _ = h.Write([]byte(name))
	return int(h.Sum32() % uint32(shards))
}
