#!lua
-- Walks one partition's leases by holder (the held hash): 'extend' moves
-- the end of the given live instance's leases that end before a time, and
-- were taken after another, to a later one; 'reclaim' takes back the leases of dead instances: a task
-- due after its holder's send horizon was never sent and is PENDING again,
-- its attempt count back as before the claim; the others' leases end now,
-- to be claimed again with their lost attempts counted. Either bumps the
-- version (fencing the old holder) and publishes the task's wake-up note.
-- The task hashes are the partition's, named from its base (the due set's
-- name less "due"), so they share the partition's slot.
-- KEYS: 1 due set, 2 lease set, 3 counts, 4 tenant counts, 5 held hash
-- ARGV: 'extend': 1 'extend', 2 the instance, 3 before (ms), 4 new end (ms),
--       5 claimed after (ms): older claims are left to run out
--       'reclaim': 1 'reclaim', 2 now (ms), 3 wake channel, then pairs of a
--       dead instance and its send horizon (ms, '' for none)
-- Returns 'extend': the number extended; 'reclaim': per task taken back
-- its ID, when it is due (ms), its version and 1 if released unsent.
local base = string.sub(KEYS[1], 1, -4)
local held = redis.call('HGETALL', KEYS[5])
if ARGV[1] == 'extend' then
  local n = 0
  for i = 1, #held, 2 do
    if held[i + 1] == ARGV[2] then
      local lu = redis.call('ZSCORE', KEYS[2], held[i])
      local ca = redis.call('HGET', base .. 't:' .. held[i], 'ca')
      if lu and tonumber(lu) < tonumber(ARGV[3]) and ca and tonumber(ca) > tonumber(ARGV[5]) then
        redis.call('ZADD', KEYS[2], ARGV[4], held[i])
        redis.call('HSET', base .. 't:' .. held[i], 'lu', ARGV[4])
        n = n + 1
      end
    end
  end
  return n
end

local now = ARGV[2]
local dead = {}
for i = 4, #ARGV, 2 do
  dead[ARGV[i]] = ARGV[i + 1]
end
local out, notes = {}, {}
for i = 1, #held, 2 do
  local id, holder = held[i], held[i + 1]
  local horizon = dead[holder]
  if horizon then
    redis.call('HDEL', KEYS[5], id)
    local task = base .. 't:' .. id
    local cur = redis.call('HMGET', task, 'st', 'ho', 'next', 'an', 'v', 'tn')
    if cur[1] == 'IN_FLIGHT' and cur[2] == holder then
      local v = string.format('%d', cur[5] + 1)
      local unsent = horizon == '' or tonumber(cur[3]) > tonumber(horizon)
      local at = now
      if unsent then
        at = cur[3]
        redis.call('HSET', task, 'st', 'PENDING', 'an', string.format('%d', cur[4] - 1), 'v', v, 'lu', '0',
          'u', now, 'ho', '')
        redis.call('ZREM', KEYS[2], id)
        redis.call('ZADD', KEYS[1], at, id)
        count(cur[6], 'IN_FLIGHT', 'PENDING')
      else
        redis.call('HSET', task, 'lu', now, 'v', v, 'u', now, 'ho', '')
        redis.call('ZADD', KEYS[2], now, id)
      end
      out[#out + 1] = {id, at, v, unsent and 1 or 0}
      notes[#notes + 1] = id .. ' ' .. at .. ' ' .. v
    end
  end
end
apply(KEYS[3], KEYS[4])
if #notes > 0 then
  redis.call('PUBLISH', ARGV[3], table.concat(notes, '\n'))
end
return out
