-- acquire.lua: take a free lock and hand out the next fencing token.
-- KEYS[1]  the lock key ("redislock:{<name>}"), holding the holder's value
-- KEYS[2]  the fencing counter ("redislock:{<name>}:fence"); it never expires
-- ARGV[1]  the value to store (see value.go)
-- ARGV[2]  the ttl in milliseconds
-- Reply    taken: the new fencing token, an integer >= 1.
--          held:  {counter, PTTL of the lock key in ms, the holder's value}.
-- On success it publishes "acquired" on KEYS[1] .. ":events".
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local fence = redis.call('INCR', KEYS[2])
  redis.call('PUBLISH', KEYS[1] .. ':events', 'acquired')
  return fence
end
local counter = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
return {counter, redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[1])}
