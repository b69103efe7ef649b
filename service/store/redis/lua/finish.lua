#!lua
-- Records outcomes of claimed attempts of one partition, in order, each
-- fenced on its task's version: a task that is not IN_FLIGHT at that
-- version is left alone.
-- KEYS: 1 due set, 2 lease set, 3 counts, then the keys items name by
--       position
-- ARGV: 1 wake channel, 2 attempt log cap, then 13 per item: id, task hash
--       key #, attempt log key #, version, status, next attempt (ms), previous
--       delay (ns), last error, last status, now (ms), attempt entry ('' for
--       none), key # of the first of the 3 LIVE list indexes, key # of the
--       first of the 3 list indexes of a terminal status (0 for PENDING)
-- Returns per item 0 (recorded), 1 (no such task) or 2 (lease lost).
local cap = tonumber(ARGV[2])
local res, wakes = {}, {}
for i = 3, #ARGV, 13 do
  local id, task, log = ARGV[i], KEYS[tonumber(ARGV[i + 1])], KEYS[tonumber(ARGV[i + 2])]
  local status, now = ARGV[i + 4], ARGV[i + 9]
  local cur = redis.call('HMGET', task, 'v', 'st')
  if not cur[1] then
    res[#res + 1] = 1
  elseif cur[1] ~= ARGV[i + 3] or cur[2] ~= 'IN_FLIGHT' then
    res[#res + 1] = 2
  else
    res[#res + 1] = 0
    redis.call('ZREM', KEYS[2], id)
    redis.call('HINCRBY', KEYS[3], 'IN_FLIGHT', -1)
    redis.call('HINCRBY', KEYS[3], status, 1)
    redis.call('HINCRBY', task, 'v', 1)
    redis.call('HSET', task, 'st', status, 'prev', ARGV[i + 6], 'le', ARGV[i + 7], 'ls', ARGV[i + 8],
      'lu', '0', 'u', now)
    if status == 'PENDING' then
      redis.call('HSET', task, 'next', ARGV[i + 5])
      redis.call('ZADD', KEYS[1], ARGV[i + 5], id)
      wakes[#wakes + 1] = id .. ' ' .. ARGV[i + 5]
    else
      redis.call('HSET', task, 'f', now)
      local seq = redis.call('HGET', task, 'seq')
      local live, dead = tonumber(ARGV[i + 11]), tonumber(ARGV[i + 12])
      for j = 0, 2 do
        redis.call('ZREM', KEYS[live + j], id)
        redis.call('ZADD', KEYS[dead + j], seq, id)
      end
    end
    if ARGV[i + 10] ~= '' then
      redis.call('RPUSH', log, ARGV[i + 10])
      redis.call('LTRIM', log, -cap, -1)
      redis.call('HINCRBY', task, 'ln', 1)
    end
  end
end
if #wakes > 0 then
  redis.call('PUBLISH', ARGV[1], table.concat(wakes, '\n'))
end
return res
