-- renew.lua: compare-and-pexpire. Extends the lock only while it still holds
-- our value, and records until when the renewal is valid; never re-creates a
-- missing key (restore.lua does that, and only for a holder whose renewal a
-- majority confirmed).
-- KEYS[1]  the lock key
-- KEYS[2]  the validity key (see acquire.lua)
-- KEYS[3]  the fencing counter: its lifetime starts again
-- KEYS[4]  the holder's metadata: it lives as long as the lock key; left out
--          for a lock without metadata (see scripts.go)
-- ARGV[1]  our value
-- ARGV[2]  the new ttl in milliseconds
-- ARGV[3]  the fencing counter's lifetime in milliseconds
-- Reply    1 if extended (or already held for longer), 0 if the key holds
--          another value, -1 if it is missing.
--
-- A renewal never shortens the key nor moves the validity back: with ttls
-- that change (Lock.RefreshTTL), a renewal delayed in the network can run
-- after a later one with a longer ttl, which the holder already counts on
-- (S1). A shorter ttl thus takes effect once the longer expiry has run down
-- to it; the holder's own deadline follows the shorter one at once.
local v = redis.call('MGET', KEYS[1], KEYS[2])
if v[1] == ARGV[1] then
  local t = redis.call('TIME')
  local valid = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[2])
  if valid > (tonumber(v[2] or '0') or 0) then
    redis.call('SET', KEYS[2], valid)
  end
  redis.call('PEXPIRE', KEYS[3], ARGV[3])
  local ttl = tonumber(ARGV[2])
  if KEYS[4] and redis.call('PTTL', KEYS[4]) < ttl then
    redis.call('PEXPIRE', KEYS[4], ttl)
  end
  if redis.call('PTTL', KEYS[1]) < ttl then
    redis.call('PEXPIRE', KEYS[1], ttl)
  end
  return 1
end
if v[1] then
  return 0
end
return -1
