#!lua
-- Leases the due tasks among the candidates of one partition, earliest due
-- first, up to a limit: PENDING ones whose next attempt is due move from
-- the due set to the lease set; IN_FLIGHT ones whose lease ran out stay
-- there with a new lease, their lost attempt logged and counted. Each
-- claimed task's attempt number and version go up. Others are skipped.
-- KEYS: 1 due set, 2 lease set, 3 counts, then per candidate its task hash
--       and its attempt log
-- ARGV: 1 now (ms), 2 lease until (ms), 3 limit, 4 attempt log cap,
--       5 the lost attempt's error message, 6... the candidates' IDs
-- Returns {due score, task hash} per claimed task, in claim order.
local now, limit, cap = tonumber(ARGV[1]), tonumber(ARGV[3]), tonumber(ARGV[4])
local lost = ARGV[5]

local function pack(...)
  local out = {}
  for i, v in ipairs({...}) do
    out[i] = #v .. ':' .. v
  end
  return table.concat(out)
end

local due = {}
for i = 6, #ARGV do
  local expired = false
  local s = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if not s then
    s = redis.call('ZSCORE', KEYS[2], ARGV[i])
    expired = true
  end
  if s and tonumber(s) <= now then
    due[#due + 1] = {score = tonumber(s), n = i - 5, expired = expired}
  end
end
table.sort(due, function(a, b)
  if a.score ~= b.score then return a.score < b.score end
  return a.n < b.n
end)

local out = {}
for j = 1, math.min(#due, limit) do
  local c = due[j]
  local id, task, log = ARGV[5 + c.n], KEYS[2 + 2 * c.n], KEYS[3 + 2 * c.n]
  if c.expired then
    local t = redis.call('HMGET', task, 'an', 'ca', 'lu')
    redis.call('RPUSH', log, pack(t[1], t[2], string.format('%d', (t[3] - t[2]) * 1000000), '0', lost, ''))
    redis.call('LTRIM', log, -cap, -1)
    redis.call('HINCRBY', task, 'ln', 1)
    redis.call('HSET', task, 'le', lost)
  else
    redis.call('ZREM', KEYS[1], id)
    redis.call('HINCRBY', KEYS[3], 'PENDING', -1)
    redis.call('HINCRBY', KEYS[3], 'IN_FLIGHT', 1)
  end
  redis.call('ZADD', KEYS[2], ARGV[2], id)
  redis.call('HINCRBY', task, 'an', 1)
  redis.call('HINCRBY', task, 'v', 1)
  redis.call('HSET', task, 'st', 'IN_FLIGHT', 'lu', ARGV[2], 'ca', ARGV[1], 'u', ARGV[1])
  out[j] = {c.score, redis.call('HGETALL', task)}
end
return out
