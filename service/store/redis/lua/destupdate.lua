#!lua
-- Changes a destination if it is still at the version the change was made
-- from, and bumps that version.
-- KEYS: 1 the destination's hash
-- ARGV: 1 that version, 2 spec, 3 request hash, 4 update time (ms)
-- Reply: {'ok', spec, request hash, version, created, updated} as stored
-- now; {'missing'} when there is no such destination; {'stale', version}
-- when it is at another version.
local v = redis.call('HGET', KEYS[1], 'version')
if not v then
  return {'missing'}
end
if v ~= ARGV[1] then
  return {'stale', v}
end
redis.call('HINCRBY', KEYS[1], 'version', 1)
redis.call('HSET', KEYS[1], 'spec', ARGV[2], 'hash', ARGV[3], 'updated', ARGV[4])
return {'ok', unpack(redis.call('HMGET', KEYS[1], 'spec', 'hash', 'version', 'created', 'updated'))}
