#!lua
-- Cancels (to CANCELLED) or redrives (to PENDING) one task whose status is
-- one of the allowed ones.
-- KEYS: 1 task hash, 2 due set, 3 lease set, 4 counts, 5 terminal tasks by
--       end, 6 tenant counts, then 3 list index keys per state named in
--       ARGV, in that order
-- ARGV: 1 wake channel, 2 id, 3 new status, 4 now (ms), 5 n, 6..5+n the
--       allowed statuses, then the states whose index keys follow
-- Returns {1} for no such task, {2} for a status not allowed, else
-- {0, task hash}.
local st = redis.call('HGET', KEYS[1], 'st')
if not st then
  return {1}
end
local n = tonumber(ARGV[5])
local allowed = false
for i = 6, 5 + n do
  if ARGV[i] == st then allowed = true end
end
if not allowed then
  return {2}
end
local base = {}
for i = 6 + n, #ARGV do
  base[ARGV[i]] = 7 + 3 * (i - 6 - n)
end
local function state(s)
  if s == 'PENDING' or s == 'IN_FLIGHT' then return 'LIVE' end
  return s
end

local id, to, now = ARGV[2], ARGV[3], ARGV[4]
redis.call('ZREM', KEYS[2], id)
redis.call('ZREM', KEYS[3], id)
count(redis.call('HGET', KEYS[1], 'tn'), st, to)
apply(KEYS[4], KEYS[6])
local v = redis.call('HINCRBY', KEYS[1], 'v', 1)
if to == 'PENDING' then
  redis.call('HSET', KEYS[1], 'st', 'PENDING', 'an', '0', 'prev', '0', 'le', '', 'ls', '0', 'next', now,
    'bs', now, 'f', '0', 'lu', '0', 'u', now)
  redis.call('ZADD', KEYS[2], now, id)
  redis.call('ZREM', KEYS[5], id)
  redis.call('PUBLISH', ARGV[1], id .. ' ' .. now .. ' ' .. v)
else
  redis.call('HSET', KEYS[1], 'st', to, 'f', now, 'lu', '0', 'u', now)
  redis.call('ZADD', KEYS[5], now, id)
end
local from, dest = state(st), state(to)
if from ~= dest then
  local seq = redis.call('HGET', KEYS[1], 'seq')
  for j = 0, 2 do
    redis.call('ZREM', KEYS[base[from] + j], id)
    redis.call('ZADD', KEYS[base[dest] + j], seq, id)
  end
end
return {0, redis.call('HGETALL', KEYS[1])}
