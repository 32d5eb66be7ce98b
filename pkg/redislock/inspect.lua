-- inspect.lua: read a lock's state in one atomic step, for observers.
-- KEYS[1]  the lock key
-- KEYS[2]  the fencing counter
-- KEYS[3]  the holder's metadata; left out on a node where a Cluster slot's
--          migration refused the call with it (see inspect.go)
-- Reply    {counter, PTTL of the lock key in ms (-2 when absent), the
--          holder's value or false, the holder's metadata or false}: the
--          layout of acquire.lua's "held", and the metadata.
local counter = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
return {counter, redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[1]), KEYS[3] and redis.call('GET', KEYS[3]) or false}
