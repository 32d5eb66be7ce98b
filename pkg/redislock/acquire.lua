-- acquire.lua: take a free lock and hand out the next fencing token.
-- KEYS[1]  the lock key ("redislock:{<name>}"), holding the holder's value
-- KEYS[2]  the fencing counter ("redislock:{<name>}:fence"); it expires once
--          the lock has been idle for ARGV[4]
-- KEYS[3]  the validity ("redislock:{<name>}:until"): server time in ms until
--          which the last grant or renewal is valid; it never expires, so
--          that no volatile-* eviction policy can take it (see keys.go)
-- KEYS[4]  the holder's metadata ("redislock:{<name>}:meta")
-- KEYS[5]  the node's epoch marker (see keys.go): "<since>:<lastsave>"
-- ARGV[1]  the value to store (see value.go)
-- ARGV[2]  the ttl in milliseconds
-- ARGV[3]  "1" when the nodes never lose an acknowledged write (AssumeDurable)
-- ARGV[4]  the fencing counter's lifetime in milliseconds (see keys.go)
-- ARGV[5]  the holder's metadata, "" for none
-- ARGV[6]  "1" to announce the grant here; "0" when the grant counts only
--          once replicas acknowledge it (WaitReplicas), and the caller
--          announces it then (see announce in lock.go)
-- Reply    taken: the new fencing token (see below).
--          held:  {counter, PTTL of the lock key in ms, the holder's value}.
--          held back: {reason, ms until the node may grant the lock}, where
--          reason 0 is the restart guard and 1 a vanished key.
-- On success, with ARGV[6] "1", it publishes "acquired" on KEYS[1] .. ":events"
-- (with SPUBLISH on a Redis Cluster: see scripts.go).
--
-- The key is set first, as the cheapest test of whether the lock is free; a
-- lock that turns out held back is deleted again before the script ends, so
-- no one sees it.
--
-- Vanished keys: a lock key that is gone before its holder's time is up (a
-- DEL, an eviction, a force-release) is not free: its holder may still
-- believe it holds the lock until the validity the last renewal recorded.
--
-- The restart guard (guard) and the next fencing token (next_fence) are
-- guard.lua's, which runs ahead of this file.
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local h = redis.call('MGET', KEYS[2], KEYS[1])
  return {tonumber(h[1] or '0') or 0, redis.call('PTTL', KEYS[1]), h[2]}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
-- The validity, the epoch marker (the guard may need it), the fencing
-- counter and the metadata, in one read.
local v = redis.call('MGET', KEYS[3], KEYS[5], KEYS[2], KEYS[4])
local valid = tonumber(v[1] or '0') or 0
if valid > now then
  redis.call('DEL', KEYS[1])
  return {1, valid - now}
end
local since
if ARGV[3] ~= '1' then
  -- A failing read (an ACL without LASTSAVE or INFO, a renamed command)
  -- leaves nothing behind but the key, deleted here.
  local ok, s = pcall(guard, now, v[2], KEYS[5])
  local wait = ok and s + ttl - now
  if not ok or wait > 0 then
    redis.call('DEL', KEYS[1])
  end
  if not ok then
    return redis.error_reply('redislock: restart guard: ' .. (type(s) == 'table' and tostring(s.err) or tostring(s)))
  end
  if wait > 0 then
    return {0, wait}
  end
  since = s
end
-- The fencing token: next_fence (guard.lua). One SET writes it and the
-- counter's lifetime: the script runs alone, so reading the counter in the
-- MGET above and adding one here is an increment. (string.format: Lua
-- writes a number this large in exponent form.)
local fence = next_fence(v[3], since, now)
redis.call('SET', KEYS[2], string.format('%d', fence), 'PX', ARGV[4])
redis.call('SET', KEYS[3], now + ttl)
if ARGV[5] ~= '' then
  redis.call('SET', KEYS[4], ARGV[5], 'PX', ARGV[2])
elseif v[4] then
  -- An earlier holder's, left behind by a vanished key: metadata lives no
  -- longer than its lock key's renewals.
  redis.call('DEL', KEYS[4])
end
if ARGV[6] == '1' then
  redis.call('PUBLISH', KEYS[1] .. ':events', 'acquired')
end
return fence
