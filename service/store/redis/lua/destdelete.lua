#!lua
-- Deletes a destination if it is at the version given ('0': at any).
-- KEYS: 1 the destination's hash, 2 the tenant's destination IDs
-- ARGV: 1 destination ID, 2 the version
-- Reply: {'ok'}; {'missing'} when there is no such destination;
-- {'stale', version} when it is at another version.
local v = redis.call('HGET', KEYS[1], 'version')
if not v then
  return {'missing'}
end
if ARGV[2] ~= '0' and v ~= ARGV[2] then
  return {'stale', v}
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return {'ok'}
