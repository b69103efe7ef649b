#!lua
-- Leases the due tasks among the candidates of one partition, earliest due
-- first, up to a limit: PENDING ones whose next attempt is due move from
-- the due set to the lease set; IN_FLIGHT ones whose lease ran out stay
-- there with a new lease, their lost attempt logged and counted. Each
-- claimed task's attempt number and version go up, and its lease names
-- the claiming instance (in the task's 'ho' and the held hash; none when
-- the instance is ''). Others are skipped.
-- KEYS: 1 due set, 2 lease set, 3 counts, 4 tenant counts, 5 held hash,
--       then per candidate its task hash and its attempt log
-- ARGV: 1 now (ms), 2 lease until (ms), 3 limit, 4 attempt log cap,
--       5 the lost attempt's error message, 6 the instance, 7... the
--       candidates' IDs
-- Returns {due score, task hash} per claimed task, in claim order.
local now, limit, cap = tonumber(ARGV[1]), tonumber(ARGV[3]), tonumber(ARGV[4])
local lost, holder = ARGV[5], ARGV[6]

local function pack(...)
  local out = {}
  for i, v in ipairs({...}) do
    out[i] = #v .. ':' .. v
  end
  return table.concat(out)
end

local due = {}
for i = 7, #ARGV do
  local expired = false
  local s = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if not s then
    s = redis.call('ZSCORE', KEYS[2], ARGV[i])
    expired = true
  end
  if s and tonumber(s) <= now then
    due[#due + 1] = {score = tonumber(s), n = i - 6, expired = expired}
  end
end
table.sort(due, function(a, b)
  if a.score ~= b.score then return a.score < b.score end
  return a.n < b.n
end)

-- Each task is read once (HGETALL), written once (HSET), and returned as
-- read with the written fields patched in: fewer calls per task is what
-- bounds a Redis shard's claims per second.
local out = {}
for j = 1, math.min(#due, limit) do
  local c = due[j]
  local id, task, log = ARGV[6 + c.n], KEYS[4 + 2 * c.n], KEYS[5 + 2 * c.n]
  local h = redis.call('HGETALL', task)
  local at = {}
  for k = 1, #h, 2 do
    at[h[k]] = k + 1
  end
  local set = {'an', string.format('%d', h[at.an] + 1), 'v', string.format('%d', h[at.v] + 1),
    'st', 'IN_FLIGHT', 'lu', ARGV[2], 'ca', ARGV[1], 'u', ARGV[1], 'ho', holder}
  if holder ~= '' then
    gather('HSET', KEYS[5], id, holder)
  elseif c.expired then
    gather('HDEL', KEYS[5], id)
  end
  if c.expired then
    local entry = pack(h[at.an], h[at.ca], string.format('%d', (h[at.lu] - h[at.ca]) * 1000000), '0', lost, '')
    if redis.call('RPUSH', log, entry) > cap then
      redis.call('LTRIM', log, -cap, -1)
    end
    for _, f in ipairs({'le', lost, 'ln', string.format('%d', h[at.ln] + 1)}) do
      set[#set + 1] = f
    end
  else
    gather('ZREM', KEYS[1], id)
    count(h[at.tn], 'PENDING', 'IN_FLIGHT')
  end
  gather('ZADD', KEYS[2], ARGV[2], id)
  redis.call('HSET', task, unpack(set))
  for k = 1, #set, 2 do
    local pos = at[set[k]]
    if pos then
      h[pos] = set[k + 1]
    else -- a field the task did not have yet ('ho')
      h[#h + 1], h[#h + 2] = set[k], set[k + 1]
      at[set[k]] = #h
    end
  end
  out[j] = {c.score, h}
end
flush()
apply(KEYS[3], KEYS[4])
return out
