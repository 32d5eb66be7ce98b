-- inspect.lua: read a lock's state in one atomic step, for observers.
-- KEYS[1]  the lock key
-- KEYS[2]  the fencing counter
-- Reply    {holder's value or false, PTTL of the lock key in ms, counter}
local counter = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]), counter}
