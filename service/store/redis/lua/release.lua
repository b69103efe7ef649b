#!lua
-- Deletes a key if it still holds the given value: a reservation taken
-- back by the one who made it.
-- KEYS: 1 the key
-- ARGV: 1 the value
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
