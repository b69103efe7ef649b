#!lua
-- Creates a task unless its ID already has one, whose hash it returns then.
-- KEYS: 1 task hash, 2 due set, 3 counts, 4-6 the LIVE list indexes
-- ARGV: 1 wake channel, 2 id, 3 creation sequence, 4 next attempt (ms),
--       5... the hash's fields and values
if redis.call('EXISTS', KEYS[1]) == 1 then
  return redis.call('HGETALL', KEYS[1])
end
redis.call('HSET', KEYS[1], unpack(ARGV, 5))
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[2])
redis.call('HINCRBY', KEYS[3], 'PENDING', 1)
for i = 4, 6 do
  redis.call('ZADD', KEYS[i], ARGV[3], ARGV[2])
end
redis.call('PUBLISH', ARGV[1], ARGV[2] .. ' ' .. ARGV[4] .. ' 1')
return 1
