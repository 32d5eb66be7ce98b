-- guard.lua: what every script that grants a lock shares: the restart guard
-- and the rule of the next fencing token. The scripts that grant
-- (acquire.lua, shards.lua) are this file followed by their own (see
-- scripts.go); it defines functions only.
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
-- now is the server's time in ms, m the marker as read (nil when absent)
-- and key its key; it returns since.
local function guard(now, m, key)
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
    redis.call('SET', key, since .. ':' .. checked)
  end
  return since
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
-- counter is the counter's value as stored (nil when it has none), since
-- the guard's (nil when the guard is off), now the server's time in ms.
local function next_fence(counter, since, now)
  counter = tonumber(counter or '')
  if counter and counter >= 0 and counter < 9007199254740991 and counter % 1 == 0
      and not (since and counter + 1 <= since * 1000) then
    return counter + 1
  end
  return now * 1000 + 1
end
