#!lua
-- Creates new tasks of one partition on a single Redis server, in one
-- call: it takes each task's idempotency key record and ID record and
-- draws their creation sequence numbers, which TaskCreateBatch otherwise
-- reserves in a round trip of its own (on a Redis Cluster those keys are
-- in other slots), then writes the tasks as create.lua does. It writes
-- nothing and answers 0 when any task's key record, ID record or hash
-- exists already (a repeat, a conflict, another create of the key under
-- way): TaskCreateBatch then takes its general path, which sorts them out.
-- KEYS: 1 to 6 as create.lua's, 7 the creation counter, then the keys
--       tasks name by position
-- ARGV: 1 to 3 as create.lua's, then per task: key # of its hash, key # of
--       the first of its 3 LIVE list indexes, its lease's end (ms, 0 for
--       none), key # of its idempotency key record (its ID record's key
--       follows), the two records, and its F fields and values, as
--       create.lua's but for seq, which this script sets
-- Returns the creation sequence number of the first task (the others
-- follow in order), or 0.
local nf, holder = tonumber(ARGV[2]), ARGV[3]
local stride = 2 * nf + 6
for i = 4, #ARGV, stride do
  local rec = tonumber(ARGV[i + 3])
  if redis.call('EXISTS', KEYS[rec], KEYS[rec + 1], KEYS[tonumber(ARGV[i])]) > 0 then
    return 0
  end
end
local n = (#ARGV - 3) / stride
local first = redis.call('INCRBY', KEYS[7], n) - n + 1
local wakes = {}
for i = 4, #ARGV, stride do
  local rec, f = tonumber(ARGV[i + 3]), i + 6
  redis.call('SET', KEYS[rec], ARGV[i + 4])
  redis.call('SET', KEYS[rec + 1], ARGV[i + 5])
  ARGV[f + 9] = string.format('%d', first + (i - 4) / stride)
  newTask(KEYS[tonumber(ARGV[i])], tonumber(ARGV[i + 1]), ARGV[i + 2], f, nf, holder, wakes)
end
created(ARGV[1], wakes)
return first
