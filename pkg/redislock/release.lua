-- release.lua: compare-and-delete. Deletes the lock only while it still holds
-- our value, with the validity it recorded (the holder gives its time up) and
-- its metadata, then wakes waiting candidates.
-- KEYS[1]  the lock key
-- KEYS[2]  the validity key (see acquire.lua)
-- KEYS[3]  the holder's metadata; left out for a lock without metadata (see
--          scripts.go)
-- ARGV[1]  our value
-- Reply    1 if deleted, 0 if the key is missing or holds another value.
-- On success it publishes "released" on KEYS[1] .. ":events" (with SPUBLISH
-- on a Redis Cluster: see scripts.go).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', unpack(KEYS))
  redis.call('PUBLISH', KEYS[1] .. ':events', 'released')
  return 1
end
return 0
