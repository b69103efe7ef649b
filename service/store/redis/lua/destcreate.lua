#!lua
-- Creates a destination unless its tenant has one of that ID, which it
-- returns then.
-- KEYS: 1 the destination's hash, 2 the tenant's destination IDs
-- ARGV: 1 destination ID, 2 spec, 3 request hash, 4 creation time (ms)
-- Reply: {'created'}, or {'exists', spec, request hash, version, created,
-- updated} of the one there.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return {'exists', unpack(redis.call('HMGET', KEYS[1], 'spec', 'hash', 'version', 'created', 'updated'))}
end
redis.call('HSET', KEYS[1], 'spec', ARGV[2], 'hash', ARGV[3], 'version', '1', 'created', ARGV[4], 'updated', ARGV[4])
redis.call('ZADD', KEYS[2], 0, ARGV[1])
return {'created'}
