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
  redis.call('SET', KEYS[3], valid)
  if ARGV[5] ~= '' then
    redis.call('SET', KEYS[4], ARGV[5], 'PX', ARGV[2])
  else
    redis.call('DEL', KEYS[4]) -- an earlier holder's, left behind
  end
  return 1
end
return 0
