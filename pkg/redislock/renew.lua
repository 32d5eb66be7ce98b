-- renew.lua: compare-and-pexpire. Extends the lock only while it still holds
-- our value; never re-creates a missing key.
-- KEYS[1]  the lock key
-- ARGV[1]  our value
-- ARGV[2]  the new ttl in milliseconds
-- Reply    1 if extended, 0 if the key is missing or holds another value.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
