#!lua
-- Records outcomes of claimed attempts of one partition, in order, each
-- fenced on its task's version: a task that is not IN_FLIGHT at that
-- version is left alone.
-- KEYS: 1 due set, 2 lease set, 3 counts, 4 terminal tasks by end, 5 tenant
--       counts, 6 held hash (lease holders), then the keys items name by
--       position
-- ARGV: 1 wake channel, 2 attempt log cap, then 14 per item: id, task hash
--       key #, attempt log key #, version, status, next attempt (ms), previous
--       delay (ns), last error, last status, now (ms), attempt entry ('' for
--       none), key # of the first of the 3 LIVE list indexes, key # of the
--       first of the 3 list indexes of a terminal status (0 for PENDING),
--       1 to take the claim's attempt back (a held task) or 0
-- Returns per item 0 (recorded), 1 (no such task) or 2 (lease lost).
local cap = tonumber(ARGV[2])
local res, wakes = {}, {}
for i = 3, #ARGV, 14 do
  local id, task, log = ARGV[i], KEYS[tonumber(ARGV[i + 1])], KEYS[tonumber(ARGV[i + 2])]
  local status, now = ARGV[i + 4], ARGV[i + 9]
  local cur = redis.call('HMGET', task, 'v', 'st', 'seq', 'ln', 'tn', 'an')
  if not cur[1] then
    res[#res + 1] = 1
  elseif cur[1] ~= ARGV[i + 3] or cur[2] ~= 'IN_FLIGHT' then
    res[#res + 1] = 2
  else
    res[#res + 1] = 0
    count(cur[5], 'IN_FLIGHT', status)
    gather('ZREM', KEYS[2], id)
    gather('HDEL', KEYS[6], id)
    local set = {'v', string.format('%d', cur[1] + 1), 'st', status, 'prev', ARGV[i + 6], 'le', ARGV[i + 7],
      'ls', ARGV[i + 8], 'lu', '0', 'u', now}
    if status == 'PENDING' then
      set[#set + 1], set[#set + 2] = 'next', ARGV[i + 5]
      if ARGV[i + 13] == '1' then
        set[#set + 1], set[#set + 2] = 'an', string.format('%d', cur[6] - 1)
      end
      gather('ZADD', KEYS[1], ARGV[i + 5], id)
      wakes[#wakes + 1] = id .. ' ' .. ARGV[i + 5] .. ' ' .. set[2]
    else
      set[#set + 1], set[#set + 2] = 'f', now
      gather('ZADD', KEYS[4], now, id)
      local live, dead = tonumber(ARGV[i + 11]), tonumber(ARGV[i + 12])
      for j = 0, 2 do
        gather('ZREM', KEYS[live + j], id)
        gather('ZADD', KEYS[dead + j], cur[3], id)
      end
    end
    if ARGV[i + 10] ~= '' then
      if redis.call('RPUSH', log, ARGV[i + 10]) > cap then
        redis.call('LTRIM', log, -cap, -1)
      end
      set[#set + 1], set[#set + 2] = 'ln', string.format('%d', cur[4] + 1)
    end
    redis.call('HSET', task, unpack(set))
  end
end
flush()
apply(KEYS[3], KEYS[5])
if #wakes > 0 then
  redis.call('PUBLISH', ARGV[1], table.concat(wakes, '\n'))
end
return res
