-- shards.lua: one candidate's turn at a sharded lock. In one call it renews
-- its membership and every shard it holds, gives back the shards it was
-- asked to, and takes the free shards the assignment gives it.
-- KEYS[1]  the shards' state ("redislock:{<name>}:shards"), a hash that never
--          expires, with the fields
--            s<i>      shard i: "<until>:<value>", its holder's value and,
--                      in server ms, until when its last grant or renewal
--                      is valid; "<until>:" once given back
--            f<i>      shard i's fencing counter
--            m<value>  a candidate: "<until>:<shards>", until when its
--                      membership counts and the shard count it asked for
--            a         the last assignment computed: the SHA1 of the live
--                      members, the shard count, and each shard's member
--                      as a byte (its place among them, plus 32), kept
--                      while the members stay the same
-- KEYS[2]  the validity floor ("redislock:{<name>}:shards:until"): the
--          latest until written to KEYS[1]. Once the hash is gone (deleted
--          or evicted) while the floor is ahead, every shard is free only
--          after it, as a vanished lock key is (acquire.lua).
-- KEYS[3]  the node's epoch marker (guard.lua)
-- ARGV[1]  our value (see value.go)
-- ARGV[2]  the ttl in milliseconds
-- ARGV[3]  "1" when the node never loses an acknowledged write (AssumeDurable)
-- ARGV[4]  the number of shards, N
-- ARGV[5]  "1" to leave: give back every shard held, and the membership
-- ARGV[6...] shards to give back, whose work has stopped
-- Reply    {wait, members, guard, i1, fence1, keep1, i2, fence2, keep2, ...}:
--          wait, the ms until the earliest change this candidate waits for
--          (another member's membership expiring, or a shard assigned to us
--          that is held by another expiring), -1 for none; members, the live
--          members counted; guard, the ms the restart guard holds grants
--          back (0 for none), or its error as a string; then each shard we
--          hold after the call: its index, its fencing token (0 when its
--          counter is gone: an HDEL), and 1 if the assignment gives it to
--          us, 0 if it is to be given back once its work stopped.
--          A member that asks for another shard count than the live members
--          is refused: an error, with nothing written.
-- It publishes "released" on "redislock:{<name>}:events" (with SPUBLISH on
-- a Redis Cluster: see scripts.go) when a shard was given back or the
-- members changed, so that the other candidates take their turn at once,
-- and "acquired" when it granted shards, which wakes observers (the
-- RedisLock controller) and no candidate.
--
-- The assignment is a function of the live members alone, so every
-- candidate computes the same one: rendezvous hashing, each (shard,
-- member) pair ranked by a hash of the shard and the member's value, the
-- pairs taken in rank order, each member taking at most floor(N/R) shards,
-- N mod R of them one more. A member that joins or leaves moves about N/R
-- shards. It costs N x R hashes and a sort of as many numbers, once per
-- change of the members: the calls in between read it from the hash.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local me, ttl, n = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[4])
local leaving = ARGV[5] == '1'
local give = {}
for k = 6, #ARGV do
  give[tonumber(ARGV[k])] = true
end

local holder, valid, counter, members, cached = {}, {}, {}, {}, ''
local flat = redis.call('HGETALL', KEYS[1])
for k = 1, #flat, 2 do
  local f, v = flat[k], flat[k + 1]
  local kind, rest = string.sub(f, 1, 1), string.sub(f, 2)
  local u, x = string.match(v, '^(%d+):(.*)$')
  if kind == 's' and u then
    local i = tonumber(rest)
    if i then
      holder[i], valid[i] = x, tonumber(u)
    end
  elseif kind == 'f' then
    local i = tonumber(rest)
    if i then
      counter[i] = v
    end
  elseif kind == 'm' and u then
    members[rest] = {tonumber(u), x}
  elseif f == 'a' then
    cached = v
  end
end
local floor = tonumber(redis.call('GET', KEYS[2]) or '0') or 0

-- The members: expired ones go, and we join, stay or leave.
local changed = false
local live, writes, drop = {}, {}, {}
for m, e in pairs(members) do
  if e[1] <= now then
    drop[#drop + 1] = 'm' .. m
    changed = true
  elseif m ~= me then
    if e[2] ~= ARGV[4] then
      return redis.error_reply('redislock: shard count: the lock has ' .. e[2] .. ' shards and this candidate asks for ' .. ARGV[4] .. '; it may change once every candidate with the old count is gone')
    end
    live[#live + 1] = m
  end
end
if leaving then
  if members[me] then
    drop[#drop + 1] = 'm' .. me
    changed = true
  end
else
  if not members[me] or members[me][1] <= now then
    changed = true
  end
  live[#live + 1] = me
  writes[#writes + 1] = 'm' .. me
  writes[#writes + 1] = (now + ttl) .. ':' .. ARGV[4]
end
table.sort(live)

-- The assignment: target[i] is shard i's member. Each (shard, member)
-- pair's rank is a 32-bit hash of both (murmur3's finalizer, with adds for
-- its xors: plain arithmetic, which every Lua runs), packed with the
-- pair's index into one number, so that the pairs sort in C.
local function mul32(a, b)
  local alo, ahi = a % 65536, math.floor(a / 65536)
  local blo, bhi = b % 65536, math.floor(b / 65536)
  return ((ahi * blo + alo * bhi) % 65536 * 65536 + alo * blo) % 4294967296
end
local function fmix(h)
  h = mul32((h + math.floor(h / 65536)) % 4294967296, 2246822507)
  h = mul32((h + math.floor(h / 8192)) % 4294967296, 3266489909)
  return (h + math.floor(h / 65536)) % 4294967296
end
local target = {}
local r = #live
-- The assignment's signature: the members and the shard count.
local sig = redis.sha1hex(table.concat(live, ',')) .. ':' .. n .. ':'
local assigned = {}
if r > 0 and r <= 200 and string.sub(cached, 1, #sig) == sig and #cached == #sig + n then
  assigned = {string.byte(cached, #sig + 1, -1)}
  for i = 0, n - 1 do
    target[i] = live[assigned[i + 1] - 32]
  end
end
-- A shard left without a member (a field this script did not write)
-- makes the assignment computed again.
local whole = r > 0
for i = 0, n - 1 do
  whole = whole and target[i] ~= nil
end
if r > 0 and not whole then
  target, assigned = {}, {}
  local seed = {}
  for j = 1, r do
    seed[j] = tonumber(string.sub(redis.sha1hex(live[j]), 1, 8), 16)
  end
  local ranked = {}
  for i = 0, n - 1 do
    local si = fmix(i + 1)
    for j = 1, r do
      ranked[#ranked + 1] = fmix((seed[j] + si) % 4294967296) * 2097152 + i * r + j - 1
    end
  end
  table.sort(ranked)
  local base, extra, full = math.floor(n / r), n % r, 0
  local load = {}
  for j = 1, r do
    load[j] = 0
  end
  for k = #ranked, 1, -1 do
    local p = ranked[k] % 2097152
    local i, j = math.floor(p / r), p % r + 1
    local l = load[j]
    if not target[i] and (l < base or (l == base and full < extra)) then
      if l == base then
        full = full + 1
      end
      target[i], load[j], assigned[i + 1] = live[j], l + 1, j + 32
    end
  end
  if r <= 200 then
    writes[#writes + 1] = 'a'
    writes[#writes + 1] = sig .. string.char(unpack(assigned))
  end
end

-- Each shard: renew or give back ours, and list the free ones that are ours
-- to take.
local wait = -1
local function waitFor(ms)
  if wait < 0 or ms < wait then
    wait = ms
  end
end
for m, e in pairs(members) do
  if m ~= me and e[1] > now then
    waitFor(e[1] - now)
  end
end
local held, take = {}, {}
local renewed, released = (now + ttl) .. ':' .. me, now .. ':'
-- A shard without its field is free, unless the whole hash is gone: then
-- every shard is held back until the floor, written down for the calls
-- that come after this one.
local vanished = #flat == 0 and floor > now
for i = 0, n - 1 do
  local upto = valid[i] or 0
  if vanished then
    upto = floor
  end
  local ours = target[i] == me
  if holder[i] == me and upto > now then
    if leaving or give[i] then
      writes[#writes + 1] = 's' .. i
      writes[#writes + 1] = released
      changed = true
    else
      writes[#writes + 1] = 's' .. i
      writes[#writes + 1] = renewed
      held[#held + 1] = {i, ours}
    end
  elseif ours and upto <= now then
    take[#take + 1] = i
  elseif ours then
    waitFor(upto - now)
  end
  if vanished then
    writes[#writes + 1] = 's' .. i
    writes[#writes + 1] = floor .. ':'
  end
end

local guarded = 0
if #take > 0 then
  local since
  if ARGV[3] ~= '1' then
    local ok, s = pcall(guard, now, redis.call('GET', KEYS[3]), KEYS[3])
    if not ok then
      guarded = 'redislock: restart guard: ' .. (type(s) == 'table' and tostring(s.err) or tostring(s))
      take = {}
    elseif s + ttl > now then
      guarded = s + ttl - now
      take = {}
    else
      since = s
    end
  end
  for _, i in ipairs(take) do
    local fence = next_fence(counter[i], since, now)
    counter[i] = string.format('%d', fence)
    writes[#writes + 1] = 'f' .. i
    writes[#writes + 1] = counter[i]
    writes[#writes + 1] = 's' .. i
    writes[#writes + 1] = renewed
    held[#held + 1] = {i, true}
  end
  table.sort(held, function(a, b) return a[1] < b[1] end)
end

if #drop > 0 then
  redis.call('HDEL', KEYS[1], unpack(drop))
end
if #writes > 0 then
  redis.call('HSET', KEYS[1], unpack(writes))
end
if #held > 0 and now + ttl > floor then
  redis.call('SET', KEYS[2], now + ttl)
end
if changed then
  redis.call('PUBLISH', string.sub(KEYS[1], 1, -8) .. ':events', 'released')
end
if #take > 0 then
  redis.call('PUBLISH', string.sub(KEYS[1], 1, -8) .. ':events', 'acquired')
end
local reply = {wait, r, guarded}
for _, h in ipairs(held) do
  reply[#reply + 1] = h[1]
  reply[#reply + 1] = tonumber(counter[h[1]] or '0') or 0
  reply[#reply + 1] = h[2] and 1 or 0
end
return reply
