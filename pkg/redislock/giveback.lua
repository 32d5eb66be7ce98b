-- giveback.lua: undo a failed acquisition on one node. Compare-and-delete,
-- like release.lua, but silent: it publishes nothing, so that a candidate's
-- give-back never wakes the candidates waiting for a real holder's release
-- (which would make them try, fail and give back in turn, for ever). It also
-- takes back the fencing token the failed acquisition counted on this node.
-- KEYS[1]  the lock key
-- KEYS[2]  the fencing counter
-- KEYS[3]  the validity key (see acquire.lua): our acquire set it, over a
--          validity that had passed, so it goes with our key
-- KEYS[4]  the holder's metadata, which our acquire set; left out for an
--          acquisition without metadata (see scripts.go)
-- ARGV[1]  the failed acquisition's value
-- ARGV[2]  its ttl in milliseconds, as acquire.lua was given it
-- Reply    1 if deleted, 0 if the key is missing or holds another value.
--
-- While the key holds our value nothing but our own acquire (INCR, or the
-- SET NX of a new counter) and fence.lua (raise to our token, the largest
-- any node handed us) changed the counter or the validity since our
-- acquire. A counter our acquire started (it equals the start value for the
-- acquire's clock reading, which the validity, now + ttl, gives back) is
-- deleted: the node is as it was before, with no counter, so a holder that
-- repairs its lock here later (restore.lua) sets the counter to its own
-- token instead of finding one that ran ahead on the clock. Deleting it is
-- safe whatever made it equal: every token this node counted before is
-- below it, and the next start value is above it while the clock does not
-- step back (S3). Otherwise one DECR brings the counter back to where it
-- was, or, after a raise, to one below our token: never below a token that
-- a holder used, and our token was never used (S3). A key that expired
-- before the give-back keeps its count: the counter may run ahead, never
-- behind. DECR keeps the counter's lifetime. A counter that is gone
-- (expired or evicted since our acquire) stays gone: DECR would make it -1,
-- and the next grant would count from there instead of starting anew above
-- every token.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  local valid = tonumber(redis.call('GET', KEYS[3]) or '')
  if KEYS[4] then
    redis.call('DEL', KEYS[1], KEYS[3], KEYS[4])
  else
    redis.call('DEL', KEYS[1], KEYS[3])
  end
  local counter = tonumber(redis.call('GET', KEYS[2]) or '')
  if counter and valid and counter == (valid - tonumber(ARGV[2])) * 1000 + 1 then
    redis.call('DEL', KEYS[2])
  elseif counter then
    redis.call('DECR', KEYS[2])
  end
  return 1
end
return 0
