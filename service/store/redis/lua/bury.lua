#!lua
-- Removes the instances whose last beat is older than a time, and returns
-- each with its send horizon ('' when it sent nothing), for ReclaimDead to
-- take their leases back. Only one caller gets a given instance.
-- KEYS: 1 beats set, 2 send horizons hash
-- ARGV: 1 the time (ms): beats before it are dead
local out = {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1])) do
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGET', KEYS[2], id) or ''
  redis.call('ZREM', KEYS[1], id)
  redis.call('HDEL', KEYS[2], id)
end
return out
