-- forcerelease.lua: an administrator's release of a lock from its holder.
-- Deletes the lock while it holds the given value, but keeps (or, for a key
-- without an expiry, sets) the validity, so that nobody is granted the lock
-- before the holder's belief has ended: the holder learns of the loss at its
-- next renewal and steps down, and the candidates woken here are held back
-- until then (acquire.lua).
-- KEYS[1]  the lock key
-- KEYS[2]  the validity key (see acquire.lua)
-- KEYS[3]  the holder's metadata, deleted with the lock key
-- ARGV[1]  the value to release
-- ARGV[2]  the ttl in milliseconds to hold candidates back for when the key
--          had no expiry (its holder, if alive, renewed within it)
-- Reply    ms until the lock may be granted (0: at once) if deleted, -1 if the
--          key is missing or holds another value.
-- On success it publishes "released" on KEYS[1] .. ":events" (with SPUBLISH
-- on a Redis Cluster: see scripts.go).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return -1
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local valid = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
local pttl = redis.call('PTTL', KEYS[1])
if pttl < 0 then
  valid = math.max(valid, now + tonumber(ARGV[2]))
else
  valid = math.max(valid, now + pttl)
end
redis.call('SET', KEYS[2], valid)
redis.call('DEL', KEYS[1], KEYS[3])
redis.call('PUBLISH', KEYS[1] .. ':events', 'released')
return valid - now
