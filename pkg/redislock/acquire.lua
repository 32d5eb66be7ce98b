-- acquire.lua: take a free lock and hand out the next fencing token.
-- KEYS[1]  the lock key ("redislock:{<name>}"), holding the holder's value
-- KEYS[2]  the fencing counter ("redislock:{<name>}:fence"); it expires once
--          the lock has been idle for ARGV[4]
-- KEYS[3]  the validity ("redislock:{<name>}:until"): server time in ms until
--          which the last grant or renewal is valid; it never expires, so
--          that no volatile-* eviction policy can take it (see keys.go)
-- KEYS[4]  the holder's metadata ("redislock:{<name>}:meta")
-- ARGV[1]  the value to store (see value.go)
-- ARGV[2]  the ttl in milliseconds
-- ARGV[3]  "1" when the nodes never lose an acknowledged write (AssumeDurable)
-- ARGV[4]  the fencing counter's lifetime in milliseconds (see keys.go)
-- ARGV[5]  the holder's metadata, "" for none
-- Reply    taken: the new fencing token (see below).
--          held:  {counter, PTTL of the lock key in ms, the holder's value}.
--          held back: {reason, ms until the node may grant the lock}, where
--          reason 0 is the restart guard and 1 a vanished key.
-- On success it publishes "acquired" on KEYS[1] .. ":events".
--
-- Vanished keys: a lock key that is gone before its holder's time is up (a
-- DEL, an eviction, a force-release) is not free: its holder may still
-- believe it holds the lock until the validity the last renewal recorded.
--
-- Restart guard: a node without the fencing counter has never granted the
-- lock, or has lost its data (a restart without persistence), and then a
-- holder it granted may still believe it holds the lock for up to a ttl
-- after the restart. Such a node grants nothing until it has been up for
-- one ttl. uptime_in_seconds is the difference of two whole-second clock
-- readings, so the node has been up for more than one second less than it.
if redis.call('EXISTS', KEYS[1]) == 0 then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local valid = tonumber(redis.call('GET', KEYS[3]) or '0') or 0
  if valid > now then
    return {1, valid - now}
  end
  -- The lock is free. The fencing counter's absence is read once: it
  -- arms the restart guard and makes the counter start anew.
  local fresh = redis.call('EXISTS', KEYS[2]) == 0
  if fresh and ARGV[3] ~= '1' then
    local up = tonumber(string.match(redis.call('INFO', 'server'), 'uptime_in_seconds:(%d+)'))
    local wait = tonumber(ARGV[2]) - (up - 1) * 1000
    if wait > 0 then
      return {0, wait}
    end
  end
  -- Fencing tokens: a node without the counter (its first grant of the lock,
  -- or after it lost its data) starts it at the server's clock in whole
  -- milliseconds since the epoch, times 1000, and each grant adds one. A node
  -- that lost its counter thus restarts above every token it handed out
  -- before, as long as its clock did not step back and it granted fewer than
  -- 1000 locks per millisecond (S3 across a restart without persistence; the
  -- restart guard puts at least a ttl between the two). Whole milliseconds
  -- make the nodes of one Redlock acquisition usually start equal, so the
  -- holder need not raise the lagging counters (fence.lua) on a fresh name.
  -- A counter that expired after its lifetime of idleness starts anew the
  -- same way: the lifetime is far longer than any ttl, so the clock has moved
  -- on by far more than the grants counted since the counter started.
  redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) -- free: always set
  if fresh then
    redis.call('SET', KEYS[2], now .. '000')
  end
  local fence = redis.call('INCR', KEYS[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
  local valid = now + tonumber(ARGV[2])
  redis.call('SET', KEYS[3], valid)
  if ARGV[5] ~= '' then
    redis.call('SET', KEYS[4], ARGV[5], 'PX', ARGV[2])
  else
    redis.call('DEL', KEYS[4])
  end
  redis.call('PUBLISH', KEYS[1] .. ':events', 'acquired')
  return fence
end
local counter = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
return {counter, redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[1])}
