#!lua flags=no-writes
-- Reads the newest entries below a cursor of list indexes of one
-- partition, all at once, so that a task moving between them (a finish, a
-- cancel, a redrive) is seen in exactly one.
-- KEYS: the list indexes
-- ARGV: 1 the cursor (+inf, or an exclusive bound: '(' and a sequence),
--       2 how many entries to read per index
-- Returns per index {id, sequence, id, sequence, ...}, newest first.
local out = {}
for i, key in ipairs(KEYS) do
  out[i] = redis.call('ZREVRANGEBYSCORE', key, ARGV[1], '-inf', 'WITHSCORES', 'LIMIT', 0, ARGV[2])
end
return out
