#!lua
-- Deletes terminal tasks of one partition that ended before a time, each
-- unless it changed since the caller read it: its hash, attempt log, list
-- index entries, count and body reference count. A task that is no longer
-- terminal, or gone, leaves the done set (a stale entry). The records the
-- caller must then release are pushed on the purged list first, so that a
-- caller that dies before releasing them leaves them for the next purge.
-- KEYS: 1 terminal tasks by end (done), 2 counts, 3 body reference counts,
--       4 purged list, 5 tenant counts, then the keys items name by position
-- ARGV: 1 before (ms), then 7 per item: id, task hash key #, attempt log
--       key #, key # of the first of the 3 list indexes of its status, seq,
--       status, purged list entry
-- Returns per item 1 (deleted) or 0 (left alone).
local before = tonumber(ARGV[1])
local terminal = {SUCCEEDED = true, EXHAUSTED = true, FAILED = true, CANCELLED = true}
local res = {}
for i = 2, #ARGV, 7 do
  local id, task, log, ix = ARGV[i], KEYS[tonumber(ARGV[i + 1])], KEYS[tonumber(ARGV[i + 2])], tonumber(ARGV[i + 3])
  local cur = redis.call('HMGET', task, 'st', 'seq', 'f', 'br', 'tn')
  if not cur[1] or not terminal[cur[1]] then
    redis.call('ZREM', KEYS[1], id)
    res[#res + 1] = 0
  elseif cur[2] ~= ARGV[i + 4] or cur[1] ~= ARGV[i + 5] or tonumber(cur[3]) >= before then
    res[#res + 1] = 0
  else
    redis.call('RPUSH', KEYS[4], ARGV[i + 6])
    redis.call('DEL', task, log)
    for j = ix, ix + 2 do
      redis.call('ZREM', KEYS[j], id)
    end
    redis.call('ZREM', KEYS[1], id)
    count(cur[5], cur[1], nil)
    if cur[4] and cur[4] ~= '' and redis.call('HINCRBY', KEYS[3], cur[4], -1) <= 0 then
      redis.call('HDEL', KEYS[3], cur[4])
    end
    res[#res + 1] = 1
  end
end
apply(KEYS[2], KEYS[5])
return res
