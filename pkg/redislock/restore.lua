-- restore.lua: Redlock holder repair. Puts a holder's key back on a node where
-- it went missing (a split vote left the node free, an admin deleted it, the
-- node restarted), so that one lost key does not leave the node free for ever
-- and every standby's attempt there failing. The holder runs it only right
-- after a majority confirmed its renewal: no other candidate can then hold a
-- majority, and the restored key, being the holder's own, can only refuse
-- others. It never counts toward the holder's own belief (S1).
-- KEYS[1]  the lock key
-- KEYS[2]  the fencing counter
-- KEYS[3]  the validity key (see acquire.lua)
-- KEYS[4]  the holder's metadata
-- ARGV[1]  the holder's value
-- ARGV[2]  the ttl in milliseconds
-- ARGV[3]  the holder's fencing token
-- ARGV[4]  the fencing counter's lifetime in milliseconds (see acquire.lua)
-- ARGV[5]  the holder's metadata, "" for none
-- Reply    1 if restored, 0 if the key exists (another candidate took it).
--
-- The validity is never moved back, as in renew.lua: this call may arrive
-- late, after a renewal with a longer ttl (Lock.RefreshTTL) that the holder
-- counts on, and after the key vanished again; a validity moved back to this
-- call's ttl would then let a rival take the node while the holder still
-- believes (S1, M1). The key itself is new here, so nothing is shortened;
-- once it expires, acquire.lua holds candidates back until the validity.
--
-- Not refused: a repair that arrives after the holder released the lock
-- re-creates the holder's key for one ttl (a ghost holder: it only refuses
-- others, and the holder no longer believes). Release leaves nothing behind
-- by which a node could tell that late call from the repair of a node that
-- lost its data, and a tombstone per released name would stay in Redis for
-- ever or be evictable; so candidates wait at most one ttl, as after a crash.
--
-- The counter is raised to the holder's token, so that any later majority
-- that includes this node starts above it (S3), as fence.lua does; it is
-- never lowered, as this call may arrive late, after the holder lost the
-- lock and a later holder counted here. A node that counted past the token
-- keeps its count: attempts whose keys expired before their give-back (a
-- give-back deletes a counter its attempt started, see giveback.lua).
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local counter = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
  if counter < tonumber(ARGV[3]) then
    redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
  else
    redis.call('PEXPIRE', KEYS[2], ARGV[4])
  end
  local t = redis.call('TIME')
  local valid = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[2])
  if valid > (tonumber(redis.call('GET', KEYS[3]) or '0') or 0) then
    redis.call('SET', KEYS[3], valid)
  end
  if ARGV[5] ~= '' then
    redis.call('SET', KEYS[4], ARGV[5], 'PX', ARGV[2])
  else
    redis.call('DEL', KEYS[4]) -- an earlier holder's, left behind
  end
  return 1
end
return 0
