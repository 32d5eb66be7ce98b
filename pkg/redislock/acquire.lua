-- acquire.lua: take a free lock and hand out the next fencing token.
-- KEYS[1]  the lock key ("redislock:{<name>}"), holding the holder's value
-- KEYS[2]  the fencing counter ("redislock:{<name>}:fence"); it expires once
--          the lock has been idle for ARGV[4]
-- KEYS[3]  the validity ("redislock:{<name>}:until"): server time in ms until
--          which the last grant or renewal is valid; it never expires, so
--          that no volatile-* eviction policy can take it (see keys.go)
-- KEYS[4]  the holder's metadata ("redislock:{<name>}:meta")
-- KEYS[5]  the node's epoch marker (see keys.go): "<since>:<lastsave>"
-- ARGV[1]  the value to store (see value.go)
-- ARGV[2]  the ttl in milliseconds
-- ARGV[3]  "1" when the nodes never lose an acknowledged write (AssumeDurable)
-- ARGV[4]  the fencing counter's lifetime in milliseconds (see keys.go)
-- ARGV[5]  the holder's metadata, "" for none
-- ARGV[6]  "1" to announce the grant here; "0" when the grant counts only
--          once replicas acknowledge it (WaitReplicas), and the caller
--          announces it then (see announce in lock.go)
-- Reply    taken: the new fencing token (see below).
--          held:  {counter, PTTL of the lock key in ms, the holder's value}.
--          held back: {reason, ms until the node may grant the lock}, where
--          reason 0 is the restart guard and 1 a vanished key.
-- On success, with ARGV[6] "1", it publishes "acquired" on KEYS[1] .. ":events"
-- (with SPUBLISH on a Redis Cluster: see scripts.go).
--
-- The key is set first, as the cheapest test of whether the lock is free; a
-- lock that turns out held back is deleted again before the script ends, so
-- no one sees it.
--
-- Vanished keys: a lock key that is gone before its holder's time is up (a
-- DEL, an eviction, a force-release) is not free: its holder may still
-- believe it holds the lock until the validity the last renewal recorded.
--
-- Restart guard: a node may have lost data (a restart without persistence,
-- or from a snapshot older than its last writes, a FLUSHALL, FLUSHDB or
-- SWAPDB), and then a holder it granted may still believe it holds the lock
-- for up to a ttl after the loss, whether the loss took the lock's fencing
-- counter too (no persistence, a flush) or left an older one (a snapshot
-- taken before the last grant: Redis's default save points). Such a node
-- grants nothing until a ttl after its data is known whole again, and a
-- counter older than that (below "since", in the counter's units) restarts
-- from the clock, as a new one does, so that no token handed out after the
-- snapshot is handed out again (S3). The epoch marker records
-- since when that is ("since", server ms), and the node's LASTSAVE when that
-- was last checked. The marker goes with the data, and a restart that
-- restores the data from disk changes LASTSAVE (Redis sets it at start-up),
-- so only a missing marker or a moved LASTSAVE (a restart, or a save) makes
-- the script read the uptime (INFO), once per node and epoch or save (on
-- each new name within the save's second: see "checked" below):
-- - no marker, and the node's commands include no flush since it started
--   (INFO commandstats): the data is as old as the process (a first use,
--   or a restart without persistence): since = the process start;
-- - no marker after a flush: since = now;
-- - a marker, and the process may have started after "since": the marker
--   came back from disk with data that may be older: since = the process
--   start; otherwise the process wrote the marker and LASTSAVE moved with
--   a save: since stays.
-- Redis reports its uptime in whole seconds, so the process started no later
-- than now - (uptime - 1s). A CONFIG RESETSTAT, which clears the flush
-- counts, counts as a flush. Not caught: SWAPDB with a database whose locks
-- use the same key prefix (its marker comes along).
local function guard(now, m)
  local saved = redis.call('LASTSAVE')
  local since, checked
  if m then
    local s, c = string.match(m, '^(%d+):(%d+)$')
    since, checked = tonumber(s), tonumber(c)
    -- A marker dated after now was not written by this guard (a clock
    -- step back aside): whoever may write keys of the node (a tenant's
    -- user may: see docs/security.md) must not hold back every name for
    -- longer than a ttl. Read it as missing.
    if since and since > now then
      since = nil
    end
  end
  if not since or checked ~= saved then
    local up = tonumber(string.match(redis.call('INFO', 'server'), 'uptime_in_seconds:(%d+)'))
    local started = math.min(now, now - (up - 1) * 1000)
    if not since then
      local stats = redis.call('INFO', 'commandstats')
      if string.find(stats, 'cmdstat_flushall:', 1, true) or string.find(stats, 'cmdstat_flushdb:', 1, true)
          or string.find(stats, 'cmdstat_swapdb:', 1, true) or string.find(stats, 'cmdstat_config|resetstat:', 1, true) then
        since = now
      else
        since = started
      end
    elseif started >= since then
      since = started
    end
    -- Within the second of the last save, a later save and a restart in
    -- that same second would show the same LASTSAVE: check again then.
    local checked = saved
    if now < (saved + 1) * 1000 then
      checked = 0
    end
    redis.call('SET', KEYS[5], since .. ':' .. checked)
  end
  return since
end

if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local h = redis.call('MGET', KEYS[2], KEYS[1])
  return {tonumber(h[1] or '0') or 0, redis.call('PTTL', KEYS[1]), h[2]}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
-- The validity, the epoch marker (the guard may need it), the fencing
-- counter and the metadata, in one read.
local v = redis.call('MGET', KEYS[3], KEYS[5], KEYS[2], KEYS[4])
local valid = tonumber(v[1] or '0') or 0
if valid > now then
  redis.call('DEL', KEYS[1])
  return {1, valid - now}
end
local since
if ARGV[3] ~= '1' then
  -- A failing read (an ACL without LASTSAVE or INFO, a renamed command)
  -- leaves nothing behind but the key, deleted here.
  local ok, s = pcall(guard, now, v[2])
  local wait = ok and s + ttl - now
  if not ok or wait > 0 then
    redis.call('DEL', KEYS[1])
  end
  if not ok then
    return redis.error_reply('redislock: restart guard: ' .. (type(s) == 'table' and tostring(s.err) or tostring(s)))
  end
  if wait > 0 then
    return {0, wait}
  end
  since = s
end
-- Fencing tokens: a node without the counter (its first grant of the lock,
-- or after it lost its data, or after the counter expired after its lifetime
-- of idleness or was evicted) starts it at the server's clock in whole
-- milliseconds since the epoch, times 1000, plus one; each grant adds one. A
-- node that lost its counter thus restarts above every token it handed out
-- before, as long as its clock did not step back and it granted fewer than
-- 1000 locks per millisecond (S3 across a restart without persistence, an
-- expiry or an eviction). Whole milliseconds make the nodes of one Redlock
-- acquisition often start equal, so the holder need not raise the lagging
-- counters (fence.lua) on a new name. (A coarser grid would make them agree
-- more often, but a counter evicted within the grid step of its last grant
-- would then start below the tokens it handed out.)
-- A counter from before the data's epoch (below "since", restored from a
-- snapshot) may lack the grants made after it, and restarts from the clock
-- too, as does one that is not a whole number below 2^53 (which no grant
-- writes, and which Lua could not count exactly).
-- One SET writes the token and the counter's lifetime: the script runs
-- alone, so reading the counter in the MGET above and adding one here is
-- an increment. (string.format: Lua writes a number this large in
-- exponent form.)
local counter = tonumber(v[3] or '')
local fence
if counter and counter >= 0 and counter < 9007199254740991 and counter % 1 == 0
    and not (since and counter + 1 <= since * 1000) then
  fence = counter + 1
else
  fence = now * 1000 + 1
end
redis.call('SET', KEYS[2], string.format('%d', fence), 'PX', ARGV[4])
redis.call('SET', KEYS[3], now + ttl)
if ARGV[5] ~= '' then
  redis.call('SET', KEYS[4], ARGV[5], 'PX', ARGV[2])
elseif v[4] then
  -- An earlier holder's, left behind by a vanished key: metadata lives no
  -- longer than its lock key's renewals.
  redis.call('DEL', KEYS[4])
end
if ARGV[6] == '1' then
  redis.call('PUBLISH', KEYS[1] .. ':events', 'acquired')
end
return fence
