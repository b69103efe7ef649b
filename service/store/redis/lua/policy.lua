#!lua
-- Registers a policy unless its tenant has one of that ID, which it
-- returns then.
-- KEYS: 1 the tenant's policies, 2 their IDs
-- ARGV: 1 policy ID, 2 its record
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur then
  return cur
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], 0, ARGV[1])
return false
