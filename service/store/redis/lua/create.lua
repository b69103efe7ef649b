#!lua
-- Creates tasks of one partition, in order, each unless its ID already has
-- a task: a task of the same tenant and idempotency key (the request was
-- repeated) is returned instead, another request's is refused. A task
-- with a lease is created claimed, as claim.lua at its creation would
-- leave it (its hash fields say so already): in the lease set, held by
-- the instance; the others go to the due set, and one PUBLISH tells of
-- them, a line each.
-- KEYS: 1 due set, 2 counts, 3 body reference counts, 4 tenant counts,
--       5 lease set, 6 held hash, then the keys tasks name by position
-- ARGV: 1 wake channel, 2 F: how many hash fields a task has, 3 the
--       instance that holds the claimed tasks ('' for none), then per
--       task: key # of its hash, key # of the first of its 3 LIVE list
--       indexes, its lease's end (ms, 0 for none), and its F fields and
--       values, the first six id, tn, ik, next, seq and br (the body
--       reference, '' for none)
-- Returns per task 1 (created), 0 (its ID has another request's task) or
-- the stored task's hash {field, value, ...}.
local nf, holder = tonumber(ARGV[2]), ARGV[3]
local res, wakes, made = {}, {}, 0
for i = 4, #ARGV, 2 * nf + 3 do
  local task, ix, lease, f = KEYS[tonumber(ARGV[i])], tonumber(ARGV[i + 1]), ARGV[i + 2], i + 3
  local id, tn, next, seq, br = ARGV[f + 1], ARGV[f + 3], ARGV[f + 7], ARGV[f + 9], ARGV[f + 11]
  if redis.call('EXISTS', task) == 1 then
    local cur = redis.call('HMGET', task, 'tn', 'ik')
    if cur[1] == tn and cur[2] == ARGV[f + 5] then
      res[#res + 1] = redis.call('HGETALL', task)
    else
      res[#res + 1] = 0
    end
  else
    redis.call('HSET', task, unpack(ARGV, f, f - 1 + 2 * nf))
    if br ~= '' then
      redis.call('HINCRBY', KEYS[3], br, 1)
    end
    if lease ~= '0' then
      gather('ZADD', KEYS[5], lease, id)
      if holder ~= '' then
        gather('HSET', KEYS[6], id, holder)
      end
      count(tn, nil, 'IN_FLIGHT')
    else
      gather('ZADD', KEYS[1], next, id)
      wakes[#wakes + 1] = id .. ' ' .. next .. ' 1'
      count(tn, nil, 'PENDING')
    end
    for j = ix, ix + 2 do
      gather('ZADD', KEYS[j], seq, id)
    end
    made = made + 1
    res[#res + 1] = 1
  end
end
if made == 0 then
  return res
end
flush()
apply(KEYS[2], KEYS[4])
if #wakes > 0 then
  redis.call('PUBLISH', ARGV[1], table.concat(wakes, '\n'))
end
return res
