#!lua
-- Creates tasks of one partition, in order, each unless its ID already has
-- a task: a task of the same tenant and idempotency key (the request was
-- repeated) is returned instead, another request's is refused. One
-- PUBLISH tells of every task created, a line each.
-- KEYS: 1 due set, 2 counts, then the keys tasks name by position
-- ARGV: 1 wake channel, 2 V: how many values each task brings, 3 to V+2
--       the hash fields they fill (the first five: id, tn, ik, next, seq),
--       V+3 C: how many fields every new task starts with the same value
--       in, then C fields and values, then per task: key # of its hash,
--       key # of the first of its 3 LIVE list indexes, its V values
-- Returns per task 1 (created), 0 (its ID has another request's task) or
-- the stored task's hash {field, value, ...}.
local nv = tonumber(ARGV[2])
local nc = tonumber(ARGV[nv + 3])
local fixed = {}
for j = 1, 2 * nc do
  fixed[j] = ARGV[nv + 3 + j]
end

-- The sorted set members to add, per key: ZADD takes them all at once, a
-- few thousand at a time (Lua's stack bounds unpack).
local adds, order = {}, {}
local function add(key, score, member)
  local a = adds[key]
  if not a then
    a = {}
    adds[key] = a
    order[#order + 1] = key
  end
  a[#a + 1] = score
  a[#a + 1] = member
end

local res, wakes = {}, {}
for i = nv + 2 * nc + 4, #ARGV, nv + 2 do
  local task, ix = KEYS[tonumber(ARGV[i])], tonumber(ARGV[i + 1])
  local id, tenant, ikey, next, seq = ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5], ARGV[i + 6]
  if redis.call('EXISTS', task) == 1 then
    local cur = redis.call('HMGET', task, 'tn', 'ik')
    if cur[1] == tenant and cur[2] == ikey then
      res[#res + 1] = redis.call('HGETALL', task)
    else
      res[#res + 1] = 0
    end
  else
    local set = {}
    for j = 1, nv do
      set[2 * j - 1], set[2 * j] = ARGV[2 + j], ARGV[i + 1 + j]
    end
    for j = 1, 2 * nc do
      set[2 * nv + j] = fixed[j]
    end
    redis.call('HSET', task, unpack(set))
    add(KEYS[1], next, id)
    for j = 0, 2 do
      add(KEYS[ix + j], seq, id)
    end
    wakes[#wakes + 1] = id .. ' ' .. next .. ' 1'
    res[#res + 1] = 1
  end
end
for _, key in ipairs(order) do
  local a = adds[key]
  for j = 1, #a, 4000 do
    redis.call('ZADD', key, unpack(a, j, math.min(j + 3999, #a)))
  end
end
if #wakes > 0 then
  redis.call('HINCRBY', KEYS[2], 'PENDING', #wakes)
  redis.call('PUBLISH', ARGV[1], table.concat(wakes, '\n'))
end
return res
