#!lua
-- Creates tasks of one partition, in order, each unless its ID already has
-- a task: a task of the same tenant and idempotency key (the request was
-- repeated) is returned instead, another request's is refused. One
-- PUBLISH tells of every task created, a line each.
-- KEYS: 1 due set, 2 counts, 3 body reference counts, 4 tenant counts, then
--       the keys tasks name by position
-- ARGV: 1 wake channel, 2 F: how many hash fields a task has, then per
--       task: key # of its hash, key # of the first of its 3 LIVE list
--       indexes, and its F fields and values, the first six id, tn, ik,
--       next, seq and br (the body reference, '' for none)
-- Returns per task 1 (created), 0 (its ID has another request's task) or
-- the stored task's hash {field, value, ...}.
local nf = tonumber(ARGV[2])
local res, wakes = {}, {}
-- The members each sorted set gains, {score, member, ...}: ZADD takes them
-- all at once, rather than one call per task and set.
local due, adds, order = {}, {}, {}
for i = 3, #ARGV, 2 * nf + 2 do
  local task, ix = KEYS[tonumber(ARGV[i])], tonumber(ARGV[i + 1])
  local id, next, seq, br = ARGV[i + 3], ARGV[i + 9], ARGV[i + 11], ARGV[i + 13]
  if redis.call('EXISTS', task) == 1 then
    local cur = redis.call('HMGET', task, 'tn', 'ik')
    if cur[1] == ARGV[i + 5] and cur[2] == ARGV[i + 7] then
      res[#res + 1] = redis.call('HGETALL', task)
    else
      res[#res + 1] = 0
    end
  else
    redis.call('HSET', task, unpack(ARGV, i + 2, i + 1 + 2 * nf))
    if br ~= '' then
      redis.call('HINCRBY', KEYS[3], br, 1)
    end
    due[#due + 1], due[#due + 2] = next, id
    for j = ix, ix + 2 do
      local a = adds[KEYS[j]]
      if not a then
        a = {}
        adds[KEYS[j]] = a
        order[#order + 1] = KEYS[j]
      end
      a[#a + 1], a[#a + 2] = seq, id
    end
    wakes[#wakes + 1] = id .. ' ' .. next .. ' 1'
    count(ARGV[i + 5], nil, 'PENDING')
    res[#res + 1] = 1
  end
end
if #wakes == 0 then
  return res
end
-- unpack puts its values on Lua's stack, which holds some 8,000.
local function zadd(key, a)
  for j = 1, #a, 4000 do
    redis.call('ZADD', key, unpack(a, j, math.min(j + 3999, #a)))
  end
end
zadd(KEYS[1], due)
for _, key in ipairs(order) do
  zadd(key, adds[key])
end
apply(KEYS[2], KEYS[4])
redis.call('PUBLISH', ARGV[1], table.concat(wakes, '\n'))
return res
