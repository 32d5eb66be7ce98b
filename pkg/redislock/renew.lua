-- renew.lua: compare-and-pexpire. Extends the lock only while it still holds
-- our value, and records until when the renewal is valid; never re-creates a
-- missing key (restore.lua does that, and only for a holder whose renewal a
-- majority confirmed).
-- KEYS[1]  the lock key
-- KEYS[2]  the validity key (see acquire.lua)
-- KEYS[3]  the fencing counter: its lifetime starts again
-- KEYS[4]  the holder's metadata: it lives as long as the lock key
-- ARGV[1]  our value
-- ARGV[2]  the new ttl in milliseconds
-- ARGV[3]  the fencing counter's lifetime in milliseconds
-- Reply    1 if extended, 0 if the key holds another value, -1 if it is
--          missing.
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  local t = redis.call('TIME')
  local valid = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[2])
  redis.call('SET', KEYS[2], valid)
  redis.call('PEXPIRE', KEYS[3], ARGV[3])
  redis.call('PEXPIRE', KEYS[4], ARGV[2])
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if v then
  return 0
end
return -1
