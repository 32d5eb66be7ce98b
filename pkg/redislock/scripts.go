package redislock

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The Lua scripts; each file's header names its KEYS, ARGV and reply. They
// run through Script.Run: EVALSHA, then EVAL when the server answers
// NOSCRIPT (after a restart or SCRIPT FLUSH).
var (
	//go:embed acquire.lua
	acquireLua    string
	acquireScript = redis.NewScript(acquireLua)

	//go:embed renew.lua
	renewLua    string
	renewScript = redis.NewScript(renewLua)

	//go:embed release.lua
	releaseLua    string
	releaseScript = redis.NewScript(releaseLua)

	//go:embed fence.lua
	fenceLua    string
	fenceScript = redis.NewScript(fenceLua)

	//go:embed inspect.lua
	inspectLua    string
	inspectScript = redis.NewScript(inspectLua)
)
