-- fence.lua: raise a fencing counter to at least a given token. Redlock runs
-- it on the quorum nodes whose counter was below the token handed out, so that
-- a majority of nodes knows the token before its holder may use it (S3).
-- KEYS[1]  the lock key
-- KEYS[2]  the fencing counter
-- ARGV[1]  our value
-- ARGV[2]  the fencing token
-- ARGV[3]  the fencing counter's lifetime in milliseconds (see acquire.lua)
-- Reply    1 if the counter now is at least ARGV[2] and the lock still holds
--          our value, 0 otherwise (the counter is left alone then).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local counter = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
if counter < tonumber(ARGV[2]) then
  redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
end
return 1
