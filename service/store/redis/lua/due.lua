#!lua
-- Reads when live tasks of one partition are due, each time with its
-- task's version, at one instant: a task's time and version always belong
-- together. Unknown and terminal tasks are left out.
-- KEYS: 1 due set, 2 lease set, then per ID its task hash
-- ARGV: the IDs
-- Returns {id, due (ms), version} per live task, flattened.
local out = {}
for i = 1, #ARGV do
  local s = redis.call('ZSCORE', KEYS[1], ARGV[i]) or redis.call('ZSCORE', KEYS[2], ARGV[i])
  if s then
    out[#out + 1] = ARGV[i]
    out[#out + 1] = s
    out[#out + 1] = redis.call('HGET', KEYS[2 + i], 'v') or '0'
  end
end
return out
