-- lockttl.lua: how long our key has left on one node.
-- KEYS[1]  the lock key
-- ARGV[1]  our value
-- Reply    the PTTL of the lock key in ms while it holds our value (-1 when
--          it has no expiry), -2 otherwise.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PTTL', KEYS[1])
end
return -2
