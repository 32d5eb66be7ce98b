package redislock

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
)

// script is one of the Lua scripts; each file's header names its KEYS, ARGV
// and reply.
type script struct {
	src     string
	sha     string
	numKeys string
}

func newScript(src, numKeys string) *script {
	sum := sha1.Sum([]byte(src))
	return &script{src: src, sha: hex.EncodeToString(sum[:]), numKeys: numKeys}
}

// args lays out an EVALSHA of s with keysAndArgs. Arguments are passed as
// pointers (*string, *int64) where they can be, which go-redis writes
// without boxing a copy.
func (s *script) args(keysAndArgs ...any) []any {
	a := make([]any, 3, 3+len(keysAndArgs))
	a[0], a[1], a[2] = "evalsha", &s.sha, &s.numKeys
	return append(a, keysAndArgs...)
}

var (
	//go:embed acquire.lua
	acquireLua    string
	acquireScript = newScript(acquireLua, "2")

	//go:embed renew.lua
	renewLua    string
	renewScript = newScript(renewLua, "1")

	//go:embed release.lua
	releaseLua    string
	releaseScript = newScript(releaseLua, "1")

	//go:embed fence.lua
	fenceLua    string
	fenceScript = newScript(fenceLua, "2")

	//go:embed inspect.lua
	inspectLua    string
	inspectScript = newScript(inspectLua, "2")
)
