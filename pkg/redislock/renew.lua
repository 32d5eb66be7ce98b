-- renew.lua: compare-and-pexpire. Extends the lock only while it still holds
-- our value; never re-creates a missing key (restore.lua does that, and only
-- for a holder whose renewal a majority confirmed).
-- KEYS[1]  the lock key
-- ARGV[1]  our value
-- ARGV[2]  the new ttl in milliseconds
-- Reply    1 if extended, 0 if the key holds another value, -1 if it is
--          missing.
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if v then
  return 0
end
return -1
