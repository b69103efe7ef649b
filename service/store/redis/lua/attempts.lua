#!lua flags=no-writes
-- Reads a page of a task's attempt log. The log keeps the last entries
-- only (see the cap), so positions count from the task's first attempt:
-- the list's head is at position logged - length.
-- KEYS: 1 task hash, 2 attempt log
-- ARGV: 1 first position wanted, 2 how many
-- Returns nil for no such task, else {first position returned, entries}.
local logged = redis.call('HGET', KEYS[1], 'ln')
if not logged then
  return false
end
local head = tonumber(logged) - redis.call('LLEN', KEYS[2])
local from = math.max(tonumber(ARGV[1]), head)
return {from, redis.call('LRANGE', KEYS[2], from - head, from - head + tonumber(ARGV[2]) - 1)}
