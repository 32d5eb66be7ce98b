package redislock

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// script is one of the Lua scripts; each file's header names its KEYS, ARGV
// and reply.
type script struct {
	src     string
	sha     string
	numKeys string
	// writes says a lock holder's belief rests on the script's writes,
	// so they must reach the replicas when Options.WaitReplicas asks.
	writes bool
	// sharded is the script's twin for Redis Cluster nodes, where it
	// publishes its events with SPUBLISH, or nil when it publishes
	// nothing (see node.eval).
	sharded *script
	// bare is the script called without its last key, the holder's
	// metadata, for a lock that has none; nil for scripts that need it.
	// On a Redis Cluster slot that is migrating, a script whose keys
	// exist only in part is refused (TRYAGAIN) until the migration ends;
	// a lock without metadata has no metadata key, so it leaves it out to
	// renew and release through a migration. The script guards each use
	// of that key.
	bare *script
}

// withBare sets s.bare (and its sharded twin's): s called with one key
// fewer.
func (s *script) withBare() *script {
	n := fmt.Sprint(mustAtoi(s.numKeys) - 1)
	s.bare = &script{src: s.src, sha: s.sha, numKeys: n, writes: s.writes}
	if s.sharded != nil {
		s.sharded.withBare()
		s.bare.sharded = s.sharded.bare
	}
	return s
}

func mustAtoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return n
}

// publishCall and spublishCall are how a script publishes a lock's events
// to every node of a deployment, and to the shard of the lock's slot only.
const (
	publishCall  = "redis.call('PUBLISH',"
	spublishCall = "redis.call('SPUBLISH',"
)

func newScript(src, numKeys string, writes bool) *script {
	sum := sha1.Sum([]byte(src))
	s := &script{src: src, sha: hex.EncodeToString(sum[:]), numKeys: numKeys, writes: writes}
	if strings.Contains(src, publishCall) {
		s.sharded = newScript(strings.ReplaceAll(src, publishCall, spublishCall), numKeys, writes)
	}
	return s
}

// appendArgs lays out an EVALSHA of s with keysAndArgs in a. Arguments are
// passed as pointers (*string, *int64) where they can be, which go-redis
// writes without boxing a copy.
func (s *script) appendArgs(a []any, keysAndArgs ...any) []any {
	a = append(a[:0], "evalsha", &s.sha, &s.numKeys)
	return append(a, keysAndArgs...)
}

var (
	// guardLua defines what the scripts that grant share: it runs ahead
	// of each of them.
	//go:embed guard.lua
	guardLua string

	//go:embed acquire.lua
	acquireLua    string
	acquireScript = newScript(guardLua+acquireLua, "5", true)

	//go:embed shards.lua
	shardsLua    string
	shardsScript = newScript(guardLua+shardsLua, "3", true)

	//go:embed renew.lua
	renewLua    string
	renewScript = newScript(renewLua, "4", true).withBare()

	//go:embed release.lua
	releaseLua    string
	releaseScript = newScript(releaseLua, "3", false).withBare()

	//go:embed giveback.lua
	givebackLua    string
	givebackScript = newScript(givebackLua, "4", false).withBare()

	//go:embed restore.lua
	restoreLua    string
	restoreScript = newScript(restoreLua, "4", true)

	//go:embed forcerelease.lua
	forceReleaseLua    string
	forceReleaseScript = newScript(forceReleaseLua, "3", true)

	//go:embed fence.lua
	fenceLua    string
	fenceScript = newScript(fenceLua, "2", true)

	//go:embed inspect.lua
	inspectLua    string
	inspectScript = newScript(inspectLua, "3", false).withBare()

	//go:embed inspectshards.lua
	inspectShardsLua    string
	inspectShardsScript = newScript(inspectShardsLua, "1", false)

	//go:embed lockttl.lua
	lockTTLLua    string
	lockTTLScript = newScript(lockTTLLua, "1", false)
)
