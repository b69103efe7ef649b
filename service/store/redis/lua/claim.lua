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

-- Each task is read once (HGETALL), written once (HSET), and returned as
-- read with the written fields patched in: fewer calls per task is what
-- bounds a Redis shard's claims per second.
local out, moved = {}, 0
for j = 1, math.min(#due, limit) do
  local c = due[j]
  local id, task, log = ARGV[5 + c.n], KEYS[2 + 2 * c.n], KEYS[3 + 2 * c.n]
  local h = redis.call('HGETALL', task)
  local at = {}
  for k = 1, #h, 2 do
    at[h[k]] = k + 1
  end
  local set = {'an', string.format('%d', h[at.an] + 1), 'v', string.format('%d', h[at.v] + 1),
    'st', 'IN_FLIGHT', 'lu', ARGV[2], 'ca', ARGV[1], 'u', ARGV[1]}
  if c.expired then
    local entry = pack(h[at.an], h[at.ca], string.format('%d', (h[at.lu] - h[at.ca]) * 1000000), '0', lost, '')
    if redis.call('RPUSH', log, entry) > cap then
      redis.call('LTRIM', log, -cap, -1)
    end
    for _, f in ipairs({'le', lost, 'ln', string.format('%d', h[at.ln] + 1)}) do
      set[#set + 1] = f
    end
  else
    redis.call('ZREM', KEYS[1], id)
    moved = moved + 1
  end
  redis.call('ZADD', KEYS[2], ARGV[2], id)
  redis.call('HSET', task, unpack(set))
  for k = 1, #set, 2 do
    h[at[set[k]]] = set[k + 1]
  end
  out[j] = {c.score, h}
end
if moved > 0 then
  redis.call('HINCRBY', KEYS[3], 'PENDING', -moved)
  redis.call('HINCRBY', KEYS[3], 'IN_FLIGHT', moved)
end
return out
