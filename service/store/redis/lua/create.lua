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
    gather('ZADD', KEYS[1], next, id)
    for j = ix, ix + 2 do
      gather('ZADD', KEYS[j], seq, id)
    end
    wakes[#wakes + 1] = id .. ' ' .. next .. ' 1'
    count(ARGV[i + 5], nil, 'PENDING')
    res[#res + 1] = 1
  end
end
if #wakes == 0 then
  return res
end
flush()
apply(KEYS[2], KEYS[4])
redis.call('PUBLISH', ARGV[1], table.concat(wakes, '\n'))
return res
