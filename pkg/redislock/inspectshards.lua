-- inspectshards.lua: read a sharded lock's holders and members in one
-- atomic step, for observers; it changes nothing.
-- KEYS[1]  the shards' state (see shards.lua)
-- ARGV[1]  the shard count N
-- Reply    {k, m1, ..., mk, v0, f0, ms0, v1, f1, ms1, ...}: the k live
--          members' values (in no order), then for each shard its holder's
--          value ('' while it is free), its fencing counter (0 when it was
--          never granted), and the ms its holder's grant or renewal is
--          valid for (0 while free). A shard whose hash vanished counts
--          as free here, though shards.lua holds it back until the floor.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = tonumber(ARGV[1])
local shard, members = {}, {}
local flat = redis.call('HGETALL', KEYS[1])
for k = 1, #flat, 2 do
  local f, v = flat[k], flat[k + 1]
  local kind, rest = string.sub(f, 1, 1), string.sub(f, 2)
  local u, x = string.match(v, '^(%d+):(.*)$')
  if kind == 'm' and u and tonumber(u) > now then
    members[#members + 1] = rest
  elseif (kind == 's' or kind == 'f') and tonumber(rest) then
    shard[kind .. rest] = v
  end
end
local reply = {#members}
for _, m in ipairs(members) do
  reply[#reply + 1] = m
end
for i = 0, n - 1 do
  local holder, left = '', 0
  local u, x = string.match(shard['s' .. i] or '', '^(%d+):(.*)$')
  if u and tonumber(u) > now and x ~= '' then
    holder, left = x, tonumber(u) - now
  end
  reply[#reply + 1] = holder
  reply[#reply + 1] = tonumber(shard['f' .. i] or '0') or 0
  reply[#reply + 1] = left
end
return reply
