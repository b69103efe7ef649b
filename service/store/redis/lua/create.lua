#!lua
-- Creates tasks of one partition, in order, each unless its ID already has
-- a task: a task of the same tenant and idempotency key (the request was
-- repeated) is returned instead, another request's is refused. A task
-- with a lease is created claimed, as claim.lua at its creation would
-- leave it (its hash fields say so already): in the lease set, held by
-- the instance; the others go to the due set, and one PUBLISH tells of
-- them, a line each (see lua/newtask.lua).
-- KEYS: 1 due set, 2 counts, 3 body reference counts, 4 tenant counts,
--       5 lease set, 6 held hash, then the keys tasks name by position
-- ARGV: 1 wake channel, 2 F: how many hash fields a task has, 3 the
--       instance that holds the claimed tasks ('' for none), then per
--       task: key # of its hash, key # of the first of its 3 LIVE list
--       indexes, its lease's end (ms, 0 for none), and its F fields and
--       values, the first six id, tn, ik, next, seq and br
-- Returns per task 1 (created), 0 (its ID has another request's task) or
-- the stored task's hash {field, value, ...}.
local nf, holder = tonumber(ARGV[2]), ARGV[3]
local res, wakes, made = {}, {}, 0
for i = 4, #ARGV, 2 * nf + 3 do
  local task, f = KEYS[tonumber(ARGV[i])], i + 3
  if redis.call('EXISTS', task) == 1 then
    local cur = redis.call('HMGET', task, 'tn', 'ik')
    if cur[1] == ARGV[f + 3] and cur[2] == ARGV[f + 5] then
      res[#res + 1] = redis.call('HGETALL', task)
    else
      res[#res + 1] = 0
    end
  else
    newTask(task, tonumber(ARGV[i + 1]), ARGV[i + 2], f, nf, holder, wakes)
    made = made + 1
    res[#res + 1] = 1
  end
end
if made > 0 then
  created(ARGV[1], wakes)
end
return res
