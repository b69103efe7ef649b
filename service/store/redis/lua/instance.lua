#!lua
-- An instance's own records (store.Instances): its beat and its send
-- horizon, each written only while the instance is alive, that is while
-- it is in the beats set (ReclaimDead removes it).
-- KEYS: 1 beats set, 2 send horizons hash
-- ARGV: 1 'beat' or 'send', 2 the instance, 3 the time (ms)
-- Returns 1, or 0 when the instance is not alive.
if not redis.call('ZSCORE', KEYS[1], ARGV[2]) then
  return 0
end
if ARGV[1] == 'beat' then
  redis.call('ZADD', KEYS[1], ARGV[3], ARGV[2])
else
  local cur = tonumber(redis.call('HGET', KEYS[2], ARGV[2]) or '0')
  if tonumber(ARGV[3]) > cur then
    redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
  end
end
return 1
