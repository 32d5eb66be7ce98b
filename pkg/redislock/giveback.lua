-- giveback.lua: undo a failed acquisition on one node. Compare-and-delete,
-- like release.lua, but silent: it publishes nothing, so that a candidate's
-- give-back never wakes the candidates waiting for a real holder's release
-- (which would make them try, fail and give back in turn, for ever). It also
-- takes back the fencing token the failed acquisition counted on this node.
-- KEYS[1]  the lock key
-- KEYS[2]  the fencing counter
-- KEYS[3]  the validity key (see acquire.lua): our acquire set it, over a
--          validity that had passed, so it goes with our key
-- KEYS[4]  the holder's metadata, which our acquire set
-- ARGV[1]  the failed acquisition's value
-- Reply    1 if deleted, 0 if the key is missing or holds another value.
--
-- While the key holds our value nothing but our own acquire (INCR) and
-- fence.lua (raise to our token, the largest any node handed us) changed
-- the counter since our acquire, so one DECR brings it back to where it was,
-- or, after a raise, to one below our token: never below a token that a
-- holder used, and our token was never used (S3). A key that expired before
-- the give-back keeps its count: the counter may run ahead, never behind.
-- DECR keeps the counter's lifetime. A counter that is gone (expired or
-- evicted since our acquire) stays gone: DECR would make it -1, and the next
-- grant would count from there instead of starting anew above every token.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1], KEYS[3], KEYS[4])
  if redis.call('EXISTS', KEYS[2]) == 1 then
    redis.call('DECR', KEYS[2])
  end
  return 1
end
return 0
