-- Writes gathered per command and key, made at the end of a script
-- (flush), one call for many tasks: a redis.call costs a few times more
-- than a member it carries (its reply goes through RESP into Lua), so a
-- script that moves many tasks makes one ZADD per sorted set, not one per
-- task. For writes that nothing later in the script reads, and that never
-- touch one member of one key twice (their order between commands is not
-- kept). Put before the script by newScripts, with counts.lua.

local gathered, gorder = {}, {}

-- gather appends v1 and v2 (a score and a member for ZADD, a field and a
-- value for HSET) or v1 alone (a member for ZREM, a field for HDEL) to cmd
-- on key.
local function gather(cmd, key, v1, v2)
  local byKey = gathered[cmd]
  if not byKey then
    byKey = {}
    gathered[cmd] = byKey
  end
  local a = byKey[key]
  if not a then
    a = {}
    byKey[key] = a
    gorder[#gorder + 1] = {cmd, key}
  end
  a[#a + 1] = v1
  if v2 then
    a[#a + 1] = v2
  end
end

-- flush makes the gathered writes, a call per command and key (per 4,000
-- values: unpack puts them on Lua's stack, which holds some 8,000).
local function flush()
  for _, ck in ipairs(gorder) do
    local a = gathered[ck[1]][ck[2]]
    for j = 1, #a, 4000 do
      redis.call(ck[1], ck[2], unpack(a, j, math.min(j + 3999, #a)))
    end
  end
  gathered, gorder = {}, {}
end
