package redislock

import (
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"
)

// The epoch marker is the restart guard's record of since when a node's
// data is known whole (acquire.lua says how it is read and written). It is
// one key per node, P + "epoch" (P is Options.KeyPrefix), which no lock key
// can be, as lock keys hold a brace. A Cluster runs a script only on keys
// of one slot, so there each slot has its own marker, P + "{<tag>}:epoch",
// with a tag that hashes to the lock's slot; a slot's marker moves with its
// keys when the slot migrates. It never expires, so that no volatile-*
// eviction policy takes it; an allkeys-* policy that does only makes the
// node wait a ttl again.
const epochSuffix = "epoch"

// nodeKeys returns the key named suffix that a node keeps for every lock
// under prefix (the epoch marker): one key for every
// name, or, when the nodes include a Cluster, one per slot,
// P + "{<tag>}:" + suffix, a function of the name's slot.
func nodeKeys(prefix, suffix string, nodes []redis.UniversalClient) func(name string) string {
	for _, n := range nodes {
		if _, ok := n.(interface{ Options() *redis.ClusterOptions }); ok {
			return func(name string) string {
				return prefix + "{" + slotTags()[slot(name)] + "}:" + suffix
			}
		}
	}
	key := prefix + suffix
	return func(string) string { return key }
}

// slots is the number of Redis Cluster hash slots.
const slots = 16384

// slotTags holds, for each slot, a short string that hashes to it.
var slotTags = sync.OnceValue(func() *[slots]string {
	var tags [slots]string
	for i, left := 0, slots; left > 0; i++ {
		tag := strconv.FormatInt(int64(i), 36)
		if s := crc16(tag) % slots; tags[s] == "" {
			tags[s] = tag
			left--
		}
	}
	return &tags
})

// slot is the Cluster slot of a lock name: the name is its keys' hash tag.
func slot(name string) uint16 { return crc16(name) % slots }

// crc16 is the CRC-16/XMODEM checksum Redis Cluster hashes keys with.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
